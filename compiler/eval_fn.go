package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// User functions and lists: the parts of the expression language that
// let a program write a rank map or a ring order once.
//
// A function (`fn peer(r, k) = r ^ (1 << k)`) is one expression over its
// parameters, the params and the top-level lets. It sees nothing of the
// place it is called from (loop variables, lets in blocks), so a call
// means the same wherever it is written. Recursion, direct or through
// other functions, is refused where the functions are declared: every
// call then ends, and a hostile program cannot make the evaluator's
// stack grow without bound.
//
// A list (`let ring = [0, 2, 4, 6, 7, 5, 3, 1]`) is bound by a let and
// read with ring[i] and len(ring); it is not an integer, so using it as
// one is an error that says how to read it.

// declareFns collects the top-level fn statements, checks their names
// and parameters, and refuses recursion. Nested fn statements are
// reported where the body is evaluated (stmts).
func (ev *evaluator) declareFns() {
	st := ev.st
	for _, s := range st.file.Stmts {
		f := s.Fn
		if f == nil {
			continue
		}
		r := dsl.RangeOf(f.Pos, f.EndPos)
		switch {
		case slices.Contains(builtins, f.Name):
			st.errorf(r, "choose another name", "fn %s: %s is a builtin function", f.Name, f.Name)
			continue
		case ev.fns[f.Name] != nil:
			first := ev.fns[f.Name]
			st.errorf(r, "", "fn %s declared twice (first at %s)", f.Name, dsl.RangeOf(first.Pos, first.EndPos).Start)
			continue
		}
		for i, p := range f.Params {
			if slices.Contains(f.Params[:i], p) {
				st.errorf(r, "", "fn %s: parameter %s named twice", f.Name, p)
			}
		}
		if len(f.Params) > maxFnArgs {
			st.errorf(r, "", "fn %s has %d parameters; the limit is %d", f.Name, len(f.Params), maxFnArgs)
		}
		if ev.fns == nil {
			ev.fns = map[string]*dsl.FnStmt{}
		}
		ev.fns[f.Name] = f
	}
	// Depth-first over the call graph; a call to a function still on the
	// path closes a cycle, reported at that call.
	const (
		unvisited = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(name string)
	visit = func(name string) {
		mark[name] = onPath
		path = append(path, name)
		for _, c := range callsIn(ev.fns[name].Body, nil) {
			g := c.Func
			if ev.fns[g] == nil {
				continue
			}
			switch mark[g] {
			case onPath:
				cycle := slices.Concat(path[slices.Index(path, g):], []string{g})
				st.errorf(dsl.RangeOf(c.Pos, c.Pos),
					"functions may call other functions but not themselves, directly or through others; write the recursion out with a loop",
					"fn %s is recursive (%s)", g, strings.Join(cycle, " -> "))
			case unvisited:
				visit(g)
			}
		}
		path = path[:len(path)-1]
		mark[name] = done
	}
	names := make([]string, 0, len(ev.fns))
	for n := range ev.fns {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return ev.fns[a].Pos.Offset - ev.fns[b].Pos.Offset })
	for _, n := range names {
		if mark[n] == unvisited {
			visit(n)
		}
	}
	if st.diags.HasErrors() {
		ev.fns = nil // a call would recurse, or mean one of two bodies
	}
}

// callsIn appends the calls in e, in source order.
func callsIn(e *dsl.Expr, out []*dsl.Call) []*dsl.Call {
	if e == nil {
		return out
	}
	walkPrims(e, func(p *dsl.Primary) {
		if p.Call != nil {
			out = append(out, p.Call)
		}
	})
	return out
}

// walkPrims calls f on every primary of e, outer before inner.
func walkPrims(e *dsl.Expr, f func(*dsl.Primary)) {
	if e == nil {
		return
	}
	var unary func(u *dsl.Unary)
	unary = func(u *dsl.Unary) {
		p := u.Prim
		f(p)
		switch {
		case p.Paren != nil:
			walkPrims(p.Paren, f)
		case p.Call != nil:
			for _, a := range p.Call.Args {
				walkPrims(a, f)
			}
		case p.Cond != nil:
			walkPrims(p.Cond.If, f)
			walkPrims(p.Cond.Then, f)
			walkPrims(p.Cond.Else, f)
		case p.List != nil:
			for _, x := range p.List.Elems {
				walkPrims(x, f)
			}
		}
		walkPrims(p.Index, f)
	}
	unary(e.Head)
	for _, t := range e.Tail {
		unary(t.Operand)
	}
}

// maxFnArgs bounds a call's arguments, evaluated into a fixed array.
// maxCallDepth bounds calls inside calls: without recursion the depth is
// at most the number of functions, but a hostile file can declare a
// chain of a hundred thousand (the 4 MiB source bound allows about
// 200k), whose evaluation held 600 MB of goroutine stack, near Go's 1 GB
// limit, a crash no recover catches. fnCallsPerIter bounds the calls of a
// whole evaluation, per loop iteration allowed (16M by default, a few
// seconds): a function that calls another twice, which calls another
// twice, ... doubles the work with each function, and sixty of them
// would never finish.
const (
	maxFnArgs      = 16
	maxCallDepth   = 256
	fnCallsPerIter = 1
)

// callFn evaluates a call of a declared function: the arguments in the
// caller's scope, then the body with only the parameters bound above the
// top-level scope (the bindings between are hidden, see find).
func (ev *evaluator) callFn(f *dsl.FnStmt, c *dsl.Call, r func() dsl.Range) (int64, bool) {
	if len(c.Args) != len(f.Params) {
		ev.st.errorf(r(), fmt.Sprintf("declared as fn %s(%s)", f.Name, strings.Join(f.Params, ", ")),
			"%s takes %d argument(s), got %d", f.Name, len(f.Params), len(c.Args))
		return 0, false
	}
	if ev.calls >= maxCallDepth {
		ev.st.errorf(r(), "", "calls of %s nest more than %d deep", f.Name, maxCallDepth)
		return 0, false
	}
	if ev.fnCalls++; ev.fnCalls > fnCallsPerIter*int64(ev.maxIt) {
		ev.st.errorf(r(), "simplify the functions: each call here makes several more", "the program makes more than %d function calls", fnCallsPerIter*int64(ev.maxIt))
		ev.stop = true
		return 0, false
	}
	var args [maxFnArgs]int64
	for i, a := range c.Args {
		v, ok := ev.eval(a)
		if !ok {
			return 0, false
		}
		args[i] = v
	}
	top := ev.hideFrom
	if ev.calls == 0 {
		top = len(ev.vars)
		if len(ev.marks) > 0 {
			top = ev.marks[0]
		}
	}
	frame, hideFrom, hideTo := len(ev.vars), ev.hideFrom, ev.hideTo
	ev.hideFrom, ev.hideTo = top, frame
	for i, p := range f.Params {
		ev.vars = append(ev.vars, binding{name: p, v: args[i]})
	}
	ev.calls++
	v, ok := ev.eval(f.Body)
	ev.calls--
	ev.vars = ev.vars[:frame]
	ev.hideFrom, ev.hideTo = hideFrom, hideTo
	return v, ok
}

// find returns the innermost visible binding of name, nil when none.
// Inside a function call the bindings in [hideFrom, hideTo) (the
// caller's loop variables and block lets) are not visible.
func (ev *evaluator) find(name string) *binding {
	for i := len(ev.vars) - 1; i >= 0; i-- {
		if i == ev.hideTo-1 && ev.hideTo > ev.hideFrom {
			i = ev.hideFrom
			continue
		}
		if ev.vars[i].name == name {
			return &ev.vars[i]
		}
	}
	return nil
}

// headerLets binds the top-level lets, in order, for the header's
// expressions (chunks, root, peers, option values), which are evaluated
// before the body: `let per = 2` then `collective allreduce chunks per *
// ranks`. The lets are evaluated again with the body, which reports
// their problems; here they go to a throwaway state, and a let's errors
// move to the real one only when a header expression uses it (the
// header's errors end the compilation before the body runs). Otherwise
// a failing let would stop the compilation before the requirements,
// whose message is what a user should see first.
func (ev *evaluator) headerLets() {
	pre := &evaluator{st: ev.st.sub(), hdr: ev.hdr, params: ev.params, badParams: ev.badParams, names: ev.names, fns: ev.fns,
		maxOps: ev.maxOps, maxIt: ev.maxIt}
	for _, s := range ev.st.file.Stmts {
		if s.Let == nil {
			continue
		}
		n := len(pre.st.diags)
		if pre.letStmt(s.Let) {
			delete(ev.letDiags, s.Let.Name)
			continue
		}
		if ev.letDiags == nil {
			ev.letDiags = map[string]diag.Diagnostics{}
		}
		ev.letDiags[s.Let.Name] = slices.Clone(pre.st.diags[n:])
	}
	ev.vars = pre.vars
}

// letStmt binds a let's value, a list or an integer; a value that failed
// marks the binding so that its uses fail quietly (the error is the
// let's). It reports whether the value was good.
func (ev *evaluator) letStmt(l *dsl.LetStmt) bool {
	list, isList, ok := ev.listExpr(l.Value)
	var v int64
	if !isList {
		v, ok = ev.eval(l.Value)
	}
	ev.bind(l.Name, v)
	b := &ev.vars[len(ev.vars)-1]
	b.bad, b.isList, b.list = !ok, isList, list
	return ok
}

// listExpr evaluates e when it is a list: a list literal or a name bound
// to one, bare or in parentheses. isList is false (and nothing is
// reported) for anything else, which is then an integer expression.
func (ev *evaluator) listExpr(e *dsl.Expr) (list []int64, isList, ok bool) {
	if e == nil || len(e.Tail) > 0 || e.Head.Op != "" || e.Head.Prim.Index != nil {
		return nil, false, false
	}
	return ev.primList(e.Head.Prim)
}

// primList is listExpr for a primary, its index left aside.
func (ev *evaluator) primList(p *dsl.Primary) (list []int64, isList, ok bool) {
	switch {
	case p.List != nil:
		list = make([]int64, len(p.List.Elems))
		ok = true
		for i, x := range p.List.Elems {
			v, good := ev.eval(x)
			ok = ok && good
			list[i] = v
		}
		return list, true, ok
	case p.Ident != nil:
		if b := ev.find(*p.Ident); b != nil && b.isList {
			if b.bad {
				ev.poisonedUse(b.name)
			}
			return b.list, true, !b.bad
		}
	case p.Paren != nil:
		return ev.listExpr(p.Paren)
	}
	return nil, false, false
}

// index evaluates p[p.Index]: p without its index must be a list.
func (ev *evaluator) index(p *dsl.Primary) (int64, bool) {
	list, isList, ok := ev.primList(p)
	i, okI := ev.eval(p.Index)
	bare := *p
	bare.Index = nil
	if !isList {
		if p.Ident != nil {
			if _, known := ev.lookup(*p.Ident); !known {
				// Unknown, or bound to a value that failed: primary says
				// which (and says nothing for the latter).
				return ev.primary(&bare)
			}
		}
		ev.st.errorf(dsl.RangeOf(p.Pos, p.EndPos), "only a list (`let ring = [0, 2, 1, 3]`) can be indexed", "%s is an integer, not a list", primString(&bare))
		return 0, false
	}
	if !ok || !okI {
		return 0, false
	}
	if i < 0 || i >= int64(len(list)) {
		detail := fmt.Sprintf("%s has %d elements (0..%d)", primString(&bare), len(list), len(list)-1)
		if len(list) == 0 {
			detail = primString(&bare) + " is empty"
		}
		ev.st.errorf(exprRange(p.Index), detail, "index %d out of range", i)
		return 0, false
	}
	return list[i], true
}

// notAnInteger reports a list where an integer is wanted.
func (ev *evaluator) notAnInteger(name string, n int, r dsl.Range) {
	ev.st.errorf(r, fmt.Sprintf("read an element with %s[i] or the length with len(%s)", name, name), "%s is a list of %d integers, not an integer", name, n)
}
