package compiler

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Bounds that keep a hostile or mistaken program from running away.
const (
	maxEvalOps    = 4 << 20
	maxLoopIters  = 1 << 24
	maxRanks      = ir.MaxRanks // what ir.Validate accepts
	maxChunks     = 1 << 16
	maxScratchIdx = 1 << 20
)

var optionNames = []string{"protocol", "instances", "threads_per_block", "min_message_size", "max_message_size",
	"double_scratch", "reuse_resources", "name", "reduce", "intra", "inter"}

var bufferNames = []string{"input", "output", "scratch"}

// evaluate runs the program: it reads the header, binds parameters (the
// defaults, overridden by defines), then executes let/for/if and records
// every op statement with its evaluated operands, which it returns in
// program order.
func evaluate(st *state) *evaluated {
	ev := &evaluator{st: st, params: map[string]int64{}, names: map[string]bool{}, badParams: map[string]bool{}, maxOps: maxEvalOps, maxIt: maxLoopIters}
	if st.opts.MaxOps > 0 {
		ev.maxOps, ev.maxIt = st.opts.MaxOps, 4*st.opts.MaxOps
	}
	ev.header()
	if st.diags.HasErrors() {
		return &evaluated{hdr: ev.hdr}
	}
	ev.vars, ev.marks, ev.letDiags = nil, nil, nil
	if !ev.requirements() {
		// The program does not support these parameters: say only that.
		return &evaluated{hdr: ev.hdr}
	}
	ev.stmts(st.file.Stmts, -1, -1, true)
	if len(ev.ops) == 0 && !st.diags.HasErrors() {
		st.errorf(ev.hdr.pos, "add copy/reduce statements (chunk level) or an `on rank(r) tb N { ... }` block (channel level)", "the program has no operations")
	}
	return &evaluated{hdr: ev.hdr, ops: ev.ops}
}

type evaluator struct {
	st *state
	// hdr is the header, which the evaluator fills in and then reads.
	hdr header
	// ops are the evaluated ops so far, program order (evaluate's
	// result); opSlab backs them, a thousand to an allocation rather than
	// one each for the millions a large program makes.
	ops    []*evOp
	opSlab []evOp
	params map[string]int64
	names  map[string]bool // every declared param name, for suggestions
	// vars is a stack of bindings (let, loop variables); marks remember
	// where each open scope starts. A flat stack keeps million-iteration
	// loops from allocating a map per iteration.
	vars   []binding
	marks  []int
	nops   int
	iters  int
	maxOps int
	maxIt  int
	stop   bool
	// ints caches parsed integer literals; ranges the range of each op
	// statement, which all its ops share.
	ints   map[*dsl.Primary]int64
	ranges map[*dsl.OpStmt]*dsl.Range
	// refSlab backs the operand lists of evaluated ops.
	refSlab []evRef
	// pure caches pureBody; worker marks an evaluator of forParallel,
	// which runs its loops serially.
	pure   map[*dsl.ForStmt]bool
	worker bool
	// badParams are the params whose default failed to evaluate.
	badParams map[string]bool
	// checked holds the requirements the pre-pass evaluated (see
	// requirements); the body skips them.
	checked map[*dsl.RequireStmt]bool
	// fns are the declared functions (eval_fn.go); calls counts the
	// function calls being evaluated, inside which the bindings in
	// [hideFrom, hideTo) are out of sight.
	fns              map[string]*dsl.FnStmt
	calls            int
	fnCalls          int64 // made so far, bounded (callFn)
	hideFrom, hideTo int
	// letDiags, while the header is evaluated, holds the diagnostics of
	// the top-level lets that failed (see headerLets).
	letDiags map[string]diag.Diagnostics
}

// header evaluates what the body depends on: the collective header, the
// functions and params, the world's shape, the top-level lets and the
// options.
func (ev *evaluator) header() {
	h := &ev.hdr
	h.protocol, h.instances, h.threads, h.maxMsg, h.reduce = ir.Simple, 1, 1024, math.MaxUint64, ir.ReduceSum
	h.intra, h.inter = ir.ChanMemory, ir.ChanPort
	coll := ev.collectiveHeader()
	if coll == nil {
		return
	}
	// Functions, then params (in order, each may use the ones before), so
	// the header and options can use them.
	ev.declareFns()
	ev.evalParams()
	if !ev.worldShape() {
		return
	}
	ev.headerLets()
	ev.collectiveAttrs(coll)
	h.name = strings.TrimSuffix(baseName(ev.st.file.Filename), ".msccl")
	for _, s := range ev.st.file.Stmts {
		if s.Option != nil {
			ev.option(s.Option)
		}
	}
}

// collectiveHeader finds the program's one collective header and takes
// its kind; nil where there is none.
func (ev *evaluator) collectiveHeader() *dsl.CollectiveStmt {
	st, f, h := ev.st, ev.st.file, &ev.hdr
	var coll *dsl.CollectiveStmt
	for _, s := range f.Stmts {
		if s.Collective != nil {
			if coll != nil {
				st.errorf(dsl.RangeOf(s.Pos, s.EndPos), "a program implements one collective", "second collective header")
				continue
			}
			coll = s.Collective
			h.pos = dsl.RangeOf(s.Pos, s.EndPos)
		}
	}
	if coll == nil {
		st.errorf(dsl.Range{Start: dsl.Pos{Filename: f.Filename, Line: 1, Col: 1}}, "start the program with e.g. `collective allreduce chunks ranks`", "missing collective header")
		return nil
	}
	h.collective = ir.Collective(coll.Kind)
	known := false
	var names []string
	for _, c := range ir.Collectives {
		names = append(names, string(c))
		known = known || c == h.collective
	}
	if !known {
		st.errorf(dsl.RangeOf(coll.Pos, coll.EndPos), joinDetail(diag.Suggest(coll.Kind, names), "collectives: "+strings.Join(names, ", ")), "unknown collective %q", coll.Kind)
	}
	return coll
}

// evalParams evaluates the params in order (a -D define wins over the
// default) and refuses a -D that names no param.
func (ev *evaluator) evalParams() {
	st, f := ev.st, ev.st.file
	seen := map[string]bool{}
	for _, s := range f.Stmts {
		if s.Param == nil {
			continue
		}
		ev.names[s.Param.Name] = true
		r := dsl.RangeOf(s.Pos, s.EndPos)
		if seen[s.Param.Name] {
			st.errorf(r, "", "param %s declared twice", s.Param.Name)
			continue
		}
		seen[s.Param.Name] = true
		if v, ok := ev.defines(s.Param.Name); ok {
			ev.params[s.Param.Name] = v
			continue
		}
		if v, ok := ev.eval(s.Param.Default); ok {
			ev.params[s.Param.Name] = v
		} else {
			ev.badParams[s.Param.Name] = true
		}
	}
	var defNames []string
	for k := range st.defines {
		defNames = append(defNames, k)
	}
	sort.Strings(defNames)
	declared := make([]string, 0, len(seen))
	for k := range seen {
		declared = append(declared, k)
	}
	sort.Strings(declared)
	for _, k := range defNames {
		if !seen[k] {
			st.errorf(dsl.Range{Start: dsl.Pos{Filename: f.Filename, Line: 1, Col: 1}}, joinDetail(diag.Suggest(k, declared), "params: "+strings.Join(declared, ", ")),
				"-D %s: the program declares no param %s", k, k)
		}
	}
}

// worldShape takes ranks, and nodes and gpus_per_node where given, and
// checks that they agree; false where they do not.
func (ev *evaluator) worldShape() bool {
	st, h := ev.st, &ev.hdr
	n, ok := ev.params["ranks"]
	if !ok {
		st.errorf(h.pos, "declare the world size with e.g. `param ranks = 8`", "missing param ranks")
		return false
	}
	if n < 1 || n > maxRanks {
		st.errorf(h.pos, "", "ranks = %d is out of range 1..%d", n, maxRanks)
		return false
	}
	h.ranks = int(n)
	h.nodes, h.gpusPerNode = 1, h.ranks
	nodes, hasNodes := ev.params["nodes"]
	gpn, hasGPN := ev.params["gpus_per_node"]
	switch {
	case hasNodes && hasGPN:
		if nodes*gpn != n {
			st.errorf(h.pos, fmt.Sprintf("set -D ranks=%d or change nodes/gpus_per_node", nodes*gpn), "nodes (%d) × gpus_per_node (%d) is not ranks (%d)", nodes, gpn, n)
			return false
		}
		h.nodes, h.gpusPerNode = int(nodes), int(gpn)
	case hasNodes:
		if nodes < 1 || n%nodes != 0 {
			st.errorf(h.pos, "", "ranks (%d) is not a multiple of nodes (%d)", n, nodes)
			return false
		}
		h.nodes, h.gpusPerNode = int(nodes), int(n/nodes)
	case hasGPN:
		if gpn < 1 || n%gpn != 0 {
			st.errorf(h.pos, "", "ranks (%d) is not a multiple of gpus_per_node (%d)", n, gpn)
			return false
		}
		h.nodes, h.gpusPerNode = int(n/gpn), int(gpn)
	}
	return true
}

// collectiveAttrs takes the header's attributes (inplace, root, peers,
// chunks) and sizes the buffers in chunks.
func (ev *evaluator) collectiveAttrs(coll *dsl.CollectiveStmt) {
	st, h := ev.st, &ev.hdr
	h.chunks = 1
	var rootAttr, peersAttr *dsl.CollectiveAttr
	for _, a := range coll.Attrs {
		switch {
		case a.Inplace:
			h.inplace = true
		case a.Root != nil:
			if st.once(&rootAttr, a, "root") {
				ev.root(a)
			}
		case a.Peers != nil:
			if st.once(&peersAttr, a, "peers") {
				ev.peers(a)
			}
		default:
			if v, ok := ev.eval(a.Chunks); ok {
				if v < 1 || v > maxChunks {
					st.errorf(exprRange(a.Chunks), "", "chunks = %d is out of range 1..%d", v, maxChunks)
				} else {
					h.chunks = int(v)
				}
			}
		}
	}
	c := h.chunks
	switch {
	case h.collective.Gathers():
		h.inChunks, h.outChunks = c, c*h.ranks
	case h.collective.Scatters():
		h.inChunks, h.outChunks = c*h.ranks, c
	case h.collective == ir.AllToAll:
		h.inChunks, h.outChunks = c*h.ranks, c*h.ranks
	default:
		h.inChunks, h.outChunks = c, c
	}
	if h.inChunks > maxChunks || h.outChunks > maxChunks {
		st.errorf(h.pos, "", "the buffers would have %d chunks; the limit is %d", max(h.inChunks, h.outChunks), maxChunks)
	}
}

// root evaluates `root EXPR`: a rank, for the collectives that have one.
func (ev *evaluator) root(a *dsl.CollectiveAttr) {
	st, h := ev.st, &ev.hdr
	r := dsl.RangeOf(a.Pos, a.EndPos)
	if !h.collective.Rooted() {
		st.errorf(r, "only broadcast, reduce, gather and scatter have a root", "%s has no root", h.collective)
		return
	}
	v, ok := ev.eval(a.Root)
	if !ok {
		return
	}
	if v < 0 || v >= int64(h.ranks) {
		detail := fmt.Sprintf("ranks are 0..%d", h.ranks-1)
		if vals := ev.valuesIn(a.Root); vals != "" {
			detail += " (" + vals + ")"
		}
		st.errorf(exprRange(a.Root), detail, "root %d out of range", v)
		return
	}
	h.root = int(v)
}

// peers evaluates sendrecv's `peers r -> EXPR` or `peers [EXPR, ...]`
// into where each rank sends, which must be a permutation of the ranks:
// with two senders to one rank, one of them would overwrite the other's
// data, and some rank would receive nothing.
func (ev *evaluator) peers(a *dsl.CollectiveAttr) {
	st, h := ev.st, &ev.hdr
	m := a.Peers
	if h.collective != ir.SendRecv {
		st.errorf(dsl.RangeOf(a.Pos, a.EndPos), "only sendrecv has a peer map", "%s has no peers", h.collective)
		return
	}
	n := h.ranks
	if m.List != nil && len(m.List) != n {
		st.errorf(dsl.RangeOf(m.Pos, m.EndPos), "list where each rank sends, rank 0 first, or write `peers r -> EXPR`",
			"the peer list has %d entries for %d ranks", len(m.List), n)
		return
	}
	peers := make([]int, n)
	exprs := make([]*dsl.Expr, n)
	for r := range n {
		e := m.Expr
		if m.List != nil {
			e = m.List[r]
		} else {
			ev.push()
			ev.bind(m.Var, int64(r))
		}
		v, ok := ev.eval(e)
		if m.List == nil {
			ev.pop()
		}
		if !ok {
			return
		}
		if v < 0 || v >= int64(n) {
			st.errorf(exprRange(e), fmt.Sprintf("ranks are 0..%d", n-1), "rank %d sends to %d, out of range", r, v)
			return
		}
		peers[r], exprs[r] = int(v), e
	}
	from := make([]int, n) // 1 + the first rank that sends to q
	for r, q := range peers {
		if from[q] != 0 {
			first := from[q] - 1
			var none []string
			for _, p := range peers {
				from[p] = 1
			}
			for k := range n {
				if from[k] == 0 {
					none = append(none, strconv.Itoa(k))
				}
			}
			who := "rank " + none[0] + " receives"
			if len(none) > 1 {
				who = "ranks " + strings.Join(none, ", ") + " receive"
			}
			st.errorf(exprRange(exprs[r]), fmt.Sprintf("the peer map must be a permutation: every rank sends once and receives once (here %s nothing)", who),
				"ranks %d and %d both send to %d", first, r, q)
			return
		}
		from[q] = r + 1
	}
	for r, q := range peers {
		if q != (r+1)%n {
			h.peers = peers
			return
		}
	}
	// The default map is left out of the plan: absent means (r+1) mod n.
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

func (ev *evaluator) defines(name string) (int64, bool) {
	v, ok := ev.st.defines[name]
	return v, ok
}

func (ev *evaluator) option(o *dsl.OptionStmt) {
	st, h := ev.st, &ev.hdr
	r := exprRange(o.Value)
	name, isName := exprName(o.Value)
	intVal := func(lo, hi int64) (int64, bool) {
		v, ok := ev.eval(o.Value)
		if ok && (v < lo || v > hi) {
			st.errorf(r, "", "option %s = %d is out of range %d..%d", o.Name, v, lo, hi)
			return 0, false
		}
		return v, ok
	}
	boolVal := func() (bool, bool) {
		if isName && (name == "true" || name == "false") {
			return name == "true", true
		}
		v, ok := ev.eval(o.Value)
		return v != 0, ok
	}
	oneOf := func(choices ...string) (string, bool) {
		if !isName || !contains(choices, name) {
			got := dsl.ExprString(o.Value)
			st.errorf(r, joinDetail(diag.Suggest(got, choices), "one of: "+strings.Join(choices, ", ")), "option %s = %s is not valid", o.Name, got)
			return "", false
		}
		return name, true
	}
	switch o.Name {
	case "protocol":
		if v, ok := oneOf("Simple", "LL"); ok {
			h.protocol = ir.Protocol(v)
		}
	case "instances":
		if v, ok := intVal(1, 64); ok {
			h.instances = int(v)
		}
	case "threads_per_block":
		if v, ok := intVal(32, 1024); ok {
			h.threads = int(v)
		}
	case "min_message_size":
		if v, ok := intVal(0, math.MaxInt64); ok {
			h.minMsg = uint64(v)
		}
	case "max_message_size":
		if isName && name == "inf" {
			h.maxMsg = math.MaxUint64
		} else if v, ok := intVal(0, math.MaxInt64); ok {
			h.maxMsg = uint64(v)
		}
	case "double_scratch":
		if v, ok := boolVal(); ok {
			h.doubleScratch = v
		}
	case "reuse_resources":
		if v, ok := boolVal(); ok {
			h.reuse = v
		}
	case "name":
		p := o.Value.Head.Prim
		if p.Str == nil || len(o.Value.Tail) > 0 {
			st.errorf(r, "write the name as a string: option name = \"my_plan\"", "option name needs a string")
			return
		}
		s, err := strconv.Unquote(*p.Str)
		if err != nil {
			st.errorf(r, "", "bad string: %v", err)
			return
		}
		h.name = s
	case "reduce":
		if v, ok := oneOf("sum", "min", "max", "prod"); ok {
			h.reduce = ir.ReduceOp(v)
		}
	case "intra", "inter":
		if v, ok := oneOf("memory", "port"); ok {
			t, _ := ir.ParseChannelType(v)
			if o.Name == "intra" {
				h.intra = t
			} else {
				h.inter = t
			}
		}
	default:
		st.errorf(dsl.RangeOf(o.Pos, o.EndPos), joinDetail(diag.Suggest(o.Name, optionNames), "options: "+strings.Join(optionNames, ", ")), "unknown option %q", o.Name)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// exprName returns the name when e is a bare identifier.
func exprName(e *dsl.Expr) (string, bool) {
	if e == nil || len(e.Tail) > 0 || e.Head.Op != "" || e.Head.Prim.Ident == nil {
		return "", false
	}
	return *e.Head.Prim.Ident, true
}

func exprRange(e *dsl.Expr) dsl.Range {
	if e == nil {
		return dsl.Range{}
	}
	return dsl.RangeOf(e.Pos, e.EndPos)
}

// stmts executes a statement list. onRank/onTB are set inside an `on`
// block; top says header statements are allowed here.
func (ev *evaluator) stmts(ss []*dsl.Stmt, onRank, onTB int, top bool) []*evOp {
	var out []*evOp
	for _, s := range ss {
		if ev.stop {
			return out
		}
		// The statement's range, spelled only where it is used: this loop
		// runs once per op of the program.
		r := func() dsl.Range { return dsl.RangeOf(s.Pos, s.EndPos) }
		switch {
		case s.Collective != nil, s.Param != nil, s.Option != nil:
			if !top {
				ev.st.errorf(r(), "move it to the top level of the file", "collective, param and option statements cannot be nested")
			}
		case s.Let != nil:
			ev.letStmt(s.Let)
		case s.Fn != nil:
			if !top {
				ev.st.errorf(r(), "move it to the top level of the file", "fn statements cannot be nested")
			}
		case s.For != nil:
			out = append(out, ev.forStmt(s.For, onRank, onTB)...)
		case s.If != nil:
			out = append(out, ev.ifStmt(s.If, onRank, onTB)...)
		case s.On != nil:
			if onRank >= 0 {
				ev.st.errorf(r(), "", "`on` blocks cannot be nested")
				continue
			}
			rk, tb, ok := ev.evalPair(s.On.Rank, s.On.TB)
			if !ok {
				continue
			}
			if rk < 0 || rk >= int64(ev.hdr.ranks) {
				ev.st.errorf(exprRange(s.On.Rank), fmt.Sprintf("ranks are 0..%d", ev.hdr.ranks-1), "rank %d out of range", rk)
				continue
			}
			if tb < 0 || tb > 1023 {
				ev.st.errorf(exprRange(s.On.TB), "", "thread block %d out of range 0..1023", tb)
				continue
			}
			ev.push()
			ops := ev.stmts(s.On.Body, int(rk), int(tb), false)
			ev.pop()
			ev.ops = append(ev.ops, ops...)
		case s.Pipeline != nil:
			if onRank < 0 {
				ev.st.errorf(r(), "put it inside an `on rank(r) tb N { ... }` block", "pipeline is a channel-level op")
				continue
			}
			unit, n, ok := ev.evalPair(s.Pipeline.Unit, s.Pipeline.Chunks)
			if !ok {
				continue
			}
			if unit < 1 || unit > 1<<40 || n < 0 || n > maxChunks {
				ev.st.errorf(r(), "", "pipeline unit %d or chunks %d out of range", unit, n)
				continue
			}
			ev.push()
			body := ev.stmts(s.Pipeline.Body, onRank, onTB, false)
			ev.pop()
			pr := r()
			op := &evOp{name: "pipeline", rngp: &pr, onRank: int32(onRank), onTB: int32(onTB), tb: -1,
				evExtra: &evExtra{id: -1, cnt: -1, pipeline: &ir.IterContext{UnitSize: int(unit), NumChunks: int(n)}, body: body}}
			out = ev.add(out, op, onRank)
		case s.Require != nil:
			// A failed requirement ends the evaluation: what follows
			// assumes it, so its errors would only bury this one.
			if !ev.checked[s.Require] && !ev.require(s.Require) {
				ev.stop = true
			}
		case s.Op != nil:
			if op := ev.opStmt(s.Op, onRank, onTB); op != nil {
				out = ev.add(out, op, onRank)
			}
		}
	}
	if onRank < 0 && top {
		ev.ops = append(ev.ops, out...)
		return nil
	}
	return out
}

func (ev *evaluator) add(out []*evOp, op *evOp, onRank int) []*evOp {
	ev.nops++
	if ev.nops > ev.maxOps {
		ev.st.errorf(op.rng(), "reduce ranks or chunks", "the program produces more than %d ops", ev.maxOps)
		ev.stop = true
		return out
	}
	if onRank < 0 {
		ev.ops = append(ev.ops, op)
		return out
	}
	return append(out, op)
}

type binding struct {
	name string
	v    int64
	bad  bool // the value failed to evaluate (see poisoned)
	// isList says the binding is a list (list; v unused).
	isList bool
	list   []int64
}

func (ev *evaluator) push() { ev.marks = append(ev.marks, len(ev.vars)) }
func (ev *evaluator) pop() {
	ev.vars = ev.vars[:ev.marks[len(ev.marks)-1]]
	ev.marks = ev.marks[:len(ev.marks)-1]
}

// bind sets name in the innermost scope (a let may rebind it there).
func (ev *evaluator) bind(name string, v int64) {
	start := 0
	if len(ev.marks) > 0 {
		start = ev.marks[len(ev.marks)-1]
	}
	for i := len(ev.vars) - 1; i >= start; i-- {
		if ev.vars[i].name == name {
			// Moved to the top, so that the caller can mark it.
			ev.vars = append(append(ev.vars[:i], ev.vars[i+1:]...), binding{name: name, v: v})
			return
		}
	}
	ev.vars = append(ev.vars, binding{name: name, v: v})
}

func (ev *evaluator) forStmt(f *dsl.ForStmt, onRank, onTB int) []*evOp {
	from, ok1 := ev.eval(f.From)
	to, ok2 := ev.eval(f.To)
	step := int64(1)
	ok3 := true
	if f.Step != nil {
		step, ok3 = ev.eval(f.Step)
	}
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	if step <= 0 {
		ev.st.errorf(exprRange(f.Step), "loops count up over [from, to)", "step must be positive, got %d", step)
		return nil
	}
	n := loopCount(from, to, step)
	if n > uint64(ev.maxIt) {
		ev.st.errorf(dsl.RangeOf(f.Pos, f.EndPos), "", "loop runs %d times; the limit is %d", n, ev.maxIt)
		return nil
	}
	if onRank < 0 && ev.forParallel(f, from, step, int64(n)) {
		return nil
	}
	var out []*evOp
	for k := int64(0); k < int64(n) && !ev.stop; k++ {
		i := loopValue(from, step, k)
		if ev.iters++; ev.iters > ev.maxIt {
			ev.st.errorf(dsl.RangeOf(f.Pos, f.EndPos), "", "the program runs more than %d loop iterations", ev.maxIt)
			ev.stop = true
			break
		}
		ev.push()
		ev.bind(f.Var, i)
		out = append(out, ev.stmts(f.Body, onRank, onTB, false)...)
		ev.pop()
		if ev.st.diags.HasErrors() && len(ev.st.diags) >= 50 {
			break
		}
	}
	return out
}

// loopCount is how many times `for v in from..to step step` runs
// (step > 0). The difference is taken unsigned: to - from may not fit in
// an int64 (from = -2^62, to = 2^62), and a wrapped count would let the
// loop run away or not at all.
func loopCount(from, to, step int64) uint64 {
	if to <= from {
		return 0
	}
	d := uint64(to) - uint64(from)
	n := d / uint64(step)
	if d%uint64(step) != 0 {
		n++
	}
	return n
}

// loopValue is the loop variable in iteration k < loopCount: from +
// k*step, which lies in [from, to) and so fits, computed unsigned
// because k*step alone may not.
func loopValue(from, step, k int64) int64 {
	return int64(uint64(from) + uint64(k)*uint64(step))
}

func (ev *evaluator) ifStmt(s *dsl.IfStmt, onRank, onTB int) []*evOp {
	c, ok := ev.eval(s.Cond)
	if !ok {
		return nil
	}
	ev.push()
	defer ev.pop()
	switch {
	case c != 0:
		return ev.stmts(s.Then, onRank, onTB, false)
	case s.ElseIf != nil:
		return ev.ifStmt(s.ElseIf, onRank, onTB)
	default:
		return ev.stmts(s.Else, onRank, onTB, false)
	}
}

// once records a as the collective's only attribute of its kind in *first,
// or reports it as given twice and returns false.
func (st *state) once(first **dsl.CollectiveAttr, a *dsl.CollectiveAttr, what string) bool {
	if *first != nil {
		st.errorf(dsl.RangeOf(a.Pos, a.EndPos), "", "%s given twice (first at %s)", what, dsl.RangeOf((*first).Pos, (*first).EndPos).Start)
		return false
	}
	*first = a
	return true
}
