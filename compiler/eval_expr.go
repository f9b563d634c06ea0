package compiler

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// precedence of a binary operator; higher binds tighter. The levels are
// Go's (`^` and `|` sit with `+`, `&`, `<<` and `>>` with `*` as there, so
// `1 + 2 << 3` is 17 and `x & 1 == 0` tests a bit), not C's, where `&`
// and `|` bind looser than `==`; with `**` above them all and right-associative as in
// mathematics: `2 * 3 ** 2` is 18 and `2 ** 3 ** 2` is 512.
func precedence(op string) int {
	switch op {
	case "||":
		return 1
	case "&&":
		return 2
	case "==", "!=", "<", "<=", ">", ">=":
		return 3
	case "+", "-", "^", "|":
		return 4
	case "*", "/", "%", "<<", ">>", "&":
		return 5
	case "**":
		return 6
	}
	return 0
}

// evalPair evaluates both expressions, the second even when the first
// fails, so that one statement reports the errors of both.
func (ev *evaluator) evalPair(a, b *dsl.Expr) (x, y int64, ok bool) {
	x, okA := ev.eval(a)
	y, okB := ev.eval(b)
	return x, y, okA && okB
}

// eval evaluates an integer expression; problems are reported and ok is
// false. It runs once per op of a million-op program, so it keeps its
// stacks in small arrays and spells operand ranges only for an error.
func (ev *evaluator) eval(e *dsl.Expr) (int64, bool) {
	if e == nil {
		return 0, false
	}
	if len(e.Tail) == 0 {
		return ev.unary(e.Head) // the common case, without allocating
	}
	for _, t := range e.Tail {
		if t.Op == "||" || t.Op == "&&" {
			return ev.logic(e.Head, e.Tail, 1)
		}
	}
	return ev.chain(e.Head, e.Tail)
}

// logic evaluates the chain head tail... at level lvl: 1 splits it at
// `||`, 2 at `&&`, higher levels go to chain. The two lowest levels are
// split off first so that they can short-circuit: the operands right of
// a deciding one are never evaluated, so `b != 0 && a / b > 1` does not
// divide by zero. The loop (not recursion) keeps a hostile chain of a
// million `||` from growing the stack.
func (ev *evaluator) logic(head *dsl.Unary, tail []*dsl.BinTail, lvl int) (int64, bool) {
	if lvl > 2 {
		return ev.chain(head, tail)
	}
	op := "||"
	if lvl == 2 {
		op = "&&"
	}
	next := func(from int) int {
		for i := from; i < len(tail); i++ {
			if tail[i].Op == op {
				return i
			}
		}
		return len(tail)
	}
	end := next(0)
	if end == len(tail) {
		return ev.logic(head, tail, lvl+1) // no operator of this level
	}
	start, h := 0, head
	for {
		v, ok := ev.logic(h, tail[start:end], lvl+1)
		if !ok {
			return 0, false
		}
		// `||` is decided by a true operand, `&&` by a false one.
		if end == len(tail) || (v != 0) == (op == "||") {
			return b2i(v != 0), true
		}
		h, start = tail[end].Operand, end+1
		end = next(start)
	}
}

// chain evaluates a chain without `||` and `&&` by operator precedence.
// Beside each value it keeps the first operand of its source (overflow
// is reported over the whole operation) and whether the value is still
// that bare operand (`-2 ** 2` is refused as ambiguous).
func (ev *evaluator) chain(head *dsl.Unary, tail []*dsl.BinTail) (int64, bool) {
	v, ok := ev.unary(head)
	if !ok {
		return 0, false
	}
	if len(tail) == 0 {
		return v, true
	}
	var (
		valBuf   [8]int64
		firstBuf [8]*dsl.Unary
		bareBuf  [8]bool
		opBuf    [8]*dsl.BinTail
	)
	vals, first, bare, ops := append(valBuf[:0], v), append(firstBuf[:0], head), append(bareBuf[:0], true), opBuf[:0]
	// last is the operand just pushed: the values are contiguous, so the
	// source of the value on top of the stack ends with it.
	last := head
	reduce := func() bool {
		t := ops[len(ops)-1]
		ops = ops[:len(ops)-1]
		n := len(vals)
		x, ok := ev.binop(t, vals[n-2], vals[n-1], first[n-2], bare[n-2], last)
		vals, first, bare = append(vals[:n-2], x), first[:n-1], append(bare[:n-2], false)
		return ok
	}
	for _, t := range tail {
		p := precedence(t.Op)
		for len(ops) > 0 {
			q := precedence(ops[len(ops)-1].Op)
			// `**` is right-associative: a pending `**` waits for the next.
			if q < p || (q == p && t.Op == "**") {
				break
			}
			if !reduce() {
				return 0, false
			}
		}
		v, ok := ev.unary(t.Operand)
		if !ok {
			return 0, false
		}
		ops = append(ops, t)
		vals, first, bare = append(vals, v), append(first, t.Operand), append(bare, true)
		last = t.Operand
	}
	for len(ops) > 0 {
		if !reduce() {
			return 0, false
		}
	}
	return vals[0], true
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// wrapHint is the detail of every overflow: it names the bounds.
const wrapHint = "integers are 64-bit, -2^63..2^63-1, and never wrap"

// maxShift bounds shift counts: a shift by 63 or more moves every bit of
// a value out (or into the sign), which is never what a schedule means.
const maxShift = 62

// binop applies t.Op to a and b. The operation's source runs from
// operand first to operand last, where overflow is reported; bare says a
// is still the operand first itself. The right operand t.Operand is where
// a bad divisor, shift count or exponent is.
func (ev *evaluator) binop(t *dsl.BinTail, a, b int64, first *dsl.Unary, bare bool, last *dsl.Unary) (int64, bool) {
	rhs := func() dsl.Range { return dsl.RangeOf(t.Operand.Pos, t.Operand.Prim.EndPos) }
	whole := func() dsl.Range { return dsl.RangeOf(first.Pos, last.Prim.EndPos) }
	overflow := func() (int64, bool) {
		ev.st.errorf(whole(), wrapHint, "integer overflow: %s %s %s does not fit in 64 bits", operand(a), t.Op, operand(b))
		return 0, false
	}
	switch t.Op {
	case "==":
		return b2i(a == b), true
	case "!=":
		return b2i(a != b), true
	case "<":
		return b2i(a < b), true
	case "<=":
		return b2i(a <= b), true
	case ">":
		return b2i(a > b), true
	case ">=":
		return b2i(a >= b), true
	case "^":
		return a ^ b, true
	case "&":
		return a & b, true
	case "|":
		return a | b, true
	case "+":
		if s, ok := addInt(a, b); ok {
			return s, true
		}
		return overflow()
	case "-":
		if b != math.MinInt64 {
			if s, ok := addInt(a, -b); ok {
				return s, true
			}
		} else if a < 0 {
			return a - b, true // a - MinInt64 = a + 2^63 fits for negative a
		}
		return overflow()
	case "*":
		if p, ok := mulInt(a, b); ok {
			return p, true
		}
		return overflow()
	case "/", "%":
		if b == 0 {
			ev.st.errorf(rhs(), "", "division by zero")
			return 0, false
		}
		if b == -1 {
			// The one quotient that overflows: MinInt64 / -1.
			if t.Op == "%" {
				return 0, true
			}
			if a == math.MinInt64 {
				return overflow()
			}
			return -a, true
		}
		if t.Op == "/" {
			return floorDiv(a, b), true
		}
		return a - floorDiv(a, b)*b, true
	case "<<", ">>":
		if b < 0 || b > maxShift {
			ev.st.errorf(rhs(), fmt.Sprintf("shift counts are 0..%d", maxShift), "shift count %d out of range", b)
			return 0, false
		}
		if t.Op == ">>" {
			return a >> b, true // arithmetic: rounds toward negative infinity, like `/`
		}
		if x := a << b; x>>b == a {
			return x, true
		}
		return overflow()
	case "**":
		if bare && first.Op != "" {
			ev.st.errorf(whole(), fmt.Sprintf("write (%s%s) ** ... or %s(... ** ...)", first.Op, primString(first.Prim), first.Op),
				"%s before a base of ** is ambiguous", first.Op)
			return 0, false
		}
		if b < 0 {
			ev.st.errorf(rhs(), "integer powers need an exponent >= 0", "negative exponent %d", b)
			return 0, false
		}
		if p, ok := powInt(a, b); ok {
			return p, true
		}
		return overflow()
	}
	ev.st.errorf(rhs(), "", "unknown operator %q", t.Op)
	return 0, false
}

// operand spells a value as an operand in a message: (-2) ** 64, not
// -2 ** 64, which reads as another expression.
func operand(v int64) string {
	if v < 0 {
		return "(" + strconv.FormatInt(v, 10) + ")"
	}
	return strconv.FormatInt(v, 10)
}

// primString spells a primary for a message.
func primString(p *dsl.Primary) string {
	return dsl.ExprString(&dsl.Expr{Head: &dsl.Unary{Prim: p}})
}

// addInt is a + b and whether it fits in 64 bits.
func addInt(a, b int64) (int64, bool) {
	s := a + b
	// Overflow happened when both operands have one sign and the sum the other.
	return s, (a >= 0) != (b >= 0) || (s >= 0) == (a >= 0)
}

// mulInt is a * b and whether it fits in 64 bits.
func mulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	// MinInt64 * -1 wraps to MinInt64 and divides back "correctly".
	if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || p/b != a {
		return 0, false
	}
	return p, true
}

// powInt is a ** b (b >= 0) and whether it fits in 64 bits. Bases other
// than -1, 0 and 1 overflow within 63 multiplications, so the loop is short.
func powInt(a, b int64) (int64, bool) {
	switch {
	case b == 0 || a == 1:
		return 1, true
	case a == 0:
		return 0, true
	case a == -1:
		if b%2 == 0 {
			return 1, true
		}
		return -1, true
	}
	p := int64(1)
	for ; b > 0; b-- {
		var ok bool
		if p, ok = mulInt(p, a); !ok {
			return 0, false
		}
	}
	return p, true
}

// floorDiv rounds toward negative infinity, so (r - 1) % ranks is a rank
// for r = 0, as ring algorithms need.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (ev *evaluator) unary(u *dsl.Unary) (int64, bool) {
	v, ok := ev.primary(u.Prim)
	if !ok {
		return 0, false
	}
	switch u.Op {
	case "-":
		if v == math.MinInt64 {
			ev.st.errorf(dsl.RangeOf(u.Pos, u.Prim.EndPos), wrapHint, "integer overflow: -(%d) does not fit in 64 bits", v)
			return 0, false
		}
		return -v, true
	case "!":
		return b2i(v == 0), true
	case "~":
		return ^v, true
	}
	return v, true
}

var builtins = []string{"min", "max", "abs", "log2", "len"}

func (ev *evaluator) primary(p *dsl.Primary) (int64, bool) {
	// Spelled only for a message: primaries are evaluated millions of times.
	r := func() dsl.Range { return dsl.RangeOf(p.Pos, p.EndPos) }
	if p.Index != nil {
		return ev.index(p)
	}
	switch {
	case p.Int != nil:
		if v, ok := ev.ints[p]; ok {
			return v, true
		}
		v, ok := parseInt(*p.Int, r(), ev.st)
		if ok {
			if ev.ints == nil {
				ev.ints = map[*dsl.Primary]int64{}
			}
			ev.ints[p] = v
		}
		return v, ok
	case p.Str != nil:
		ev.st.errorf(r(), "strings are only allowed in `option name`", "expected an integer, got a string")
		return 0, false
	case p.Paren != nil:
		return ev.eval(p.Paren)
	case p.Cond != nil:
		// Only the branch taken is evaluated, as with && and ||:
		// `if per > 0 then n / per else 0` never divides by zero.
		c, ok := ev.eval(p.Cond.If)
		if !ok {
			return 0, false
		}
		if c != 0 {
			return ev.eval(p.Cond.Then)
		}
		return ev.eval(p.Cond.Else)
	case p.List != nil:
		ev.st.errorf(r(), "bind it with `let NAME = [...]` and read NAME[i], or index it here: [...][i]", "a list is not an integer")
		return 0, false
	case p.Call != nil && p.Call.Func == "len":
		if len(p.Call.Args) == 1 {
			if list, isList, ok := ev.listExpr(p.Call.Args[0]); isList {
				return int64(len(list)), ok
			}
		}
		ev.st.errorf(r(), "write len(NAME) with NAME bound by `let NAME = [...]`", "len takes one list")
		return 0, false
	case p.Call != nil && ev.fns[p.Call.Func] != nil:
		return ev.callFn(ev.fns[p.Call.Func], p.Call, r)
	case p.Call != nil:
		args := make([]int64, len(p.Call.Args))
		for i, a := range p.Call.Args {
			v, ok := ev.eval(a)
			if !ok {
				return 0, false
			}
			args[i] = v
		}
		switch p.Call.Func {
		case "min", "max":
			if len(args) == 0 {
				ev.st.errorf(r(), "", "%s needs at least one argument", p.Call.Func)
				return 0, false
			}
			m := args[0]
			for _, a := range args[1:] {
				if (p.Call.Func == "min") == (a < m) {
					m = a
				}
			}
			return m, true
		case "abs", "log2":
			if len(args) != 1 {
				ev.st.errorf(r(), "", "%s takes one argument", p.Call.Func)
				return 0, false
			}
			if p.Call.Func == "abs" {
				if args[0] == math.MinInt64 {
					ev.st.errorf(r(), wrapHint, "integer overflow: abs(%d) does not fit in 64 bits", args[0])
					return 0, false
				}
				return max(args[0], -args[0]), true
			}
			if args[0] < 1 {
				ev.st.errorf(r(), "", "log2 of %d", args[0])
				return 0, false
			}
			n := int64(0)
			for x := args[0]; x > 1; x >>= 1 {
				n++
			}
			return n, true
		}
		fns := slices.Concat(builtins, slices.Sorted(maps.Keys(ev.fns)))
		ev.st.errorf(r(), joinDetail(diag.Suggest(p.Call.Func, fns), "functions: "+strings.Join(fns, ", ")), "unknown function %q", p.Call.Func)
		return 0, false
	case p.Ident != nil:
		name := *p.Ident
		if v, ok := ev.lookup(name); ok {
			return v, true
		}
		if b := ev.find(name); b != nil && b.isList && !b.bad {
			ev.notAnInteger(name, len(b.list), r())
			return 0, false
		}
		if name == "true" || name == "false" {
			return b2i(name == "true"), true
		}
		if ev.poisoned(name) {
			ev.poisonedUse(name)
			return 0, false
		}
		ev.st.errorf(r(), joinDetail(diag.Suggest(name, ev.visible()), ev.undeclaredHint(name)), "unknown name %q", name)
		return 0, false
	}
	return 0, false
}

// lookup finds a name's integer value: the innermost visible binding,
// else a param. A binding whose value failed to evaluate hides outer ones
// and has none; so does a list (not an integer).
func (ev *evaluator) lookup(name string) (int64, bool) {
	if b := ev.find(name); b != nil {
		return b.v, !b.bad && !b.isList
	}
	v, ok := ev.params[name]
	return v, ok
}

// poisoned says whether name is bound, but to an expression whose
// evaluation failed (a let, or a param's default).
func (ev *evaluator) poisoned(name string) bool {
	if b := ev.find(name); b != nil {
		return b.bad
	}
	return ev.badParams[name]
}

// poisonedUse is a use of a name whose definition failed. That error
// was reported, and is not again at every use; in the header it is
// reported at this first use (headerLets).
func (ev *evaluator) poisonedUse(name string) {
	if ds, ok := ev.letDiags[name]; ok {
		ev.st.diags = append(ev.st.diags, ds...)
		delete(ev.letDiags, name)
	}
}

func (ev *evaluator) undeclaredHint(name string) string {
	if name == "nodes" || name == "gpus_per_node" {
		return "declare it with `param " + name + " = ...`"
	}
	if ev.calls > 0 {
		return "a function sees its parameters, the params and the top-level lets; pass anything else as an argument"
	}
	return ""
}

// visible lists the names in scope, for suggestions.
func (ev *evaluator) visible() []string {
	set := map[string]bool{}
	for i, b := range ev.vars {
		if i < ev.hideFrom || i >= ev.hideTo {
			set[b.name] = true
		}
	}
	for k := range ev.params {
		set[k] = true
	}
	for k := range ev.names {
		set[k] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// parseInt reads a decimal or hex integer with an optional binary size
// suffix (K, M, G, KiB, MiB, GiB: all powers of 1024). A leading 0 is
// not octal: 010 is ten.
func parseInt(s string, r dsl.Range, st *state) (int64, bool) {
	lit := s
	mult := int64(1)
	base := 10
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		s, base = s[2:], 16
	} else {
		for _, sfx := range []struct {
			s string
			m int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
			if strings.HasSuffix(s, sfx.s) {
				s, mult = strings.TrimSuffix(s, sfx.s), sfx.m
				break
			}
		}
	}
	v, err := strconv.ParseInt(s, base, 64)
	if err != nil || v > math.MaxInt64/mult {
		st.errorf(r, fmt.Sprintf("integers are 64-bit: at most %d (2^63-1)", int64(math.MaxInt64)), "integer %s out of range", lit)
		return 0, false
	}
	return v * mult, true
}

// opStmt evaluates one op statement's operands and clauses.
func (ev *evaluator) opStmt(o *dsl.OpStmt, onRank, onTB int) *evOp {
	op := ev.newEvOp()
	*op = evOp{name: o.Name, rngp: ev.rangeOf(o), tb: -1, onRank: int32(onRank), onTB: int32(onTB), evExtra: noExtra}
	ok := ev.opRefs(op, o)
	for _, c := range o.Clauses {
		ok = ev.opClause(op, c) && ok
	}
	if !ok {
		return nil
	}
	return op
}

// opRefs evaluates the op's sources and destinations into op.
func (ev *evaluator) opRefs(op *evOp, o *dsl.OpStmt) bool {
	ok := true
	// Both operand lists from the evaluator's slab: no allocation per op.
	nr := len(o.Src) + len(o.Dst)
	if len(ev.refSlab)+nr > cap(ev.refSlab) {
		ev.refSlab = make([]evRef, 0, max(slabSize(cap(ev.refSlab), 1024), nr))
	}
	base := len(ev.refSlab)
	ev.refSlab = ev.refSlab[:base+nr]
	refs := ev.refSlab[base : base : base+nr]
	for _, r := range o.Src {
		ref, good := ev.ref(r)
		ok = ok && good
		refs = append(refs, ref)
	}
	if len(o.Src) > 0 {
		op.src = refs[:len(o.Src):len(o.Src)]
	}
	for _, r := range o.Dst {
		ref, good := ev.ref(r)
		ok = ok && good
		refs = append(refs, ref)
	}
	if len(o.Dst) > 0 {
		op.dst = refs[len(o.Src):]
	}
	return ok
}

// clauseRange is the clause's range, spelled only for a message (or via).
func clauseRange(c *dsl.Clause) dsl.Range { return dsl.RangeOf(c.Pos, c.EndPos) }

// clauseInts evaluates the clause's n values (any number if n is 0) into
// buf when they fit; a caller that keeps them copies them.
func (ev *evaluator) clauseInts(c *dsl.Clause, buf *[4]int, n int) ([]int, bool) {
	st := ev.st
	if n > 0 && len(c.Args) != n {
		st.errorf(clauseRange(c), "", "%s takes %d value(s), got %d", c.Key, n, len(c.Args))
		return nil, false
	}
	out := buf[:0]
	for _, a := range c.Args {
		if a.At != nil {
			st.errorf(clauseRange(c), "", "`@` is only meaningful in `to PEER@TB`")
			return nil, false
		}
		v, good := ev.eval(a.Value)
		if !good {
			return nil, false
		}
		if v < -1 || v > 1<<30 {
			st.errorf(exprRange(a.Value), "", "%s value %d out of range", c.Key, v)
			return nil, false
		}
		out = append(out, int(v))
	}
	return out, true
}

// opClause evaluates one clause of an op statement into op.
func (ev *evaluator) opClause(op *evOp, c *dsl.Clause) bool {
	st := ev.st
	var buf [4]int
	ok := true
	switch c.Key {
	case "tb":
		if v, good := ev.clauseInts(c, &buf, 1); good {
			if v[0] < 0 || v[0] > 1023 {
				st.errorf(clauseRange(c), "", "thread block %d out of range 0..1023", v[0])
				ok = false
			} else {
				op.tb = int32(v[0])
			}
		} else {
			ok = false
		}
	case "via", "op":
		return ev.nameClause(op, c)
	case "to":
		return ev.toClause(op, c)
	case "sem":
		if v, good := ev.clauseInts(c, &buf, 0); good {
			op.own().sems = append([]int(nil), v...)
		} else {
			ok = false
		}
	case "tbg":
		if v, good := ev.clauseInts(c, &buf, 2); good {
			if v[1] < 1 || v[0] < 0 || v[0] >= v[1] {
				st.errorf(clauseRange(c), "write tbg ID, SIZE with 0 <= ID < SIZE", "bad thread-block group %d of %d", v[0], v[1])
				ok = false
			} else {
				op.own().tbg = &ir.TBGInfo{TBID: v[0], TBGSize: v[1]}
			}
		} else {
			ok = false
		}
	case "id", "count":
		if v, good := ev.clauseInts(c, &buf, 1); good {
			if c.Key == "id" {
				op.own().id = v[0]
			} else {
				op.own().cnt = v[0]
			}
		} else {
			ok = false
		}
	}
	return ok
}

// nameClause evaluates `via` (channel choices) and `op` (the reduction).
func (ev *evaluator) nameClause(op *evOp, c *dsl.Clause) bool {
	st := ev.st
	ok := true
	for _, a := range c.Args {
		name, isName := exprName(a.Value)
		if !isName {
			st.errorf(exprRange(a.Value), "", "%s takes a name", c.Key)
			ok = false
			continue
		}
		if c.Key == "via" {
			choices := []string{"memory", "port", "get", "put"}
			if !contains(choices, name) {
				st.errorf(exprRange(a.Value), joinDetail(diag.Suggest(name, choices), "one of: "+strings.Join(choices, ", ")), "unknown channel choice %q", name)
				ok = false
				continue
			}
			x := op.own()
			x.via = append(x.via, name)
			r := clauseRange(c)
			x.viaRng = &r
		} else {
			choices := []string{"sum", "min", "max", "prod"}
			if !contains(choices, name) || len(c.Args) != 1 {
				st.errorf(exprRange(a.Value), joinDetail(diag.Suggest(name, choices), "one of: "+strings.Join(choices, ", ")), "unknown reduction %q", name)
				ok = false
				continue
			}
			op.own().reduce = ir.ReduceOp(name)
		}
	}
	return ok
}

// toClause evaluates the peers of `to PEER[@TB], ...`.
func (ev *evaluator) toClause(op *evOp, c *dsl.Clause) bool {
	st := ev.st
	ok := true
	for _, a := range c.Args {
		v, good := ev.eval(a.Value)
		if !good {
			ok = false
			continue
		}
		ps := peerSpec{rank: int(v), tb: -1, rng: dsl.RangeOf(a.Pos, a.Value.EndPos)}
		if v < 0 || v >= int64(ev.hdr.ranks) {
			st.errorf(ps.rng, fmt.Sprintf("ranks are 0..%d", ev.hdr.ranks-1), "peer rank %d out of range", v)
			ok = false
			continue
		}
		if a.At != nil {
			t, good := ev.eval(a.At)
			if !good || t < 0 || t > 1023 {
				if good {
					st.errorf(exprRange(a.At), "", "peer thread block %d out of range 0..1023", t)
				}
				ok = false
				continue
			}
			ps.tb = int(t)
		}
		op.own().to = append(op.to, ps)
	}
	return ok
}

// ref evaluates a chunk slice and checks rank, buffer and range.
func (ev *evaluator) ref(r *dsl.Ref) (evRef, bool) {
	st, h := ev.st, &ev.hdr
	out := evRef{src: r}
	rk, ok1 := ev.eval(r.Rank)
	lo, ok2 := ev.eval(r.Lo)
	hi := lo + 1
	ok3 := true
	if r.Hi != nil {
		hi, ok3 = ev.eval(r.Hi)
	}
	switch r.Buffer {
	case "input":
		out.buf = ir.BufInput
	case "output":
		out.buf = ir.BufOutput
	case "scratch":
		out.buf = ir.BufScratch
	default:
		st.errorf(out.rng(), joinDetail(diag.Suggest(r.Buffer, bufferNames), "buffers: input, output, scratch"), "unknown buffer %q", r.Buffer)
		return out, false
	}
	if !ok1 || !ok2 || !ok3 {
		return out, false
	}
	if rk < 0 || rk >= int64(h.ranks) {
		st.errorf(exprRange(r.Rank), fmt.Sprintf("ranks are 0..%d (ranks = %d)", h.ranks-1, h.ranks), "rank %d out of range", rk)
		return out, false
	}
	n := int64(maxScratchIdx)
	switch out.buf {
	case ir.BufInput:
		n = int64(h.inChunks)
	case ir.BufOutput:
		n = int64(h.outChunks)
	}
	if lo < 0 || hi > n || lo >= hi {
		rr := dsl.RangeOf(r.Lo.Pos, r.EndPos)
		if lo >= hi && lo >= 0 && hi <= n {
			st.errorf(rr, "a slice [lo:hi] covers chunks lo..hi-1 and must not be empty", "empty chunk slice [%d:%d]", lo, hi)
		} else if r.Hi == nil {
			st.errorf(rr, fmt.Sprintf("rank %d's %s has %d chunks (0..%d)", rk, r.Buffer, n, n-1), "chunk %d out of range", lo)
		} else {
			st.errorf(rr, fmt.Sprintf("rank %d's %s has %d chunks", rk, r.Buffer, n), "chunk slice [%d:%d] out of range", lo, hi)
		}
		return out, false
	}
	out.rank, out.lo, out.hi = int32(rk), int32(lo), int32(hi)
	return out, true
}
