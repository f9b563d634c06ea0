package compiler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// `require COND, "message"` states what an algorithm supports. The
// requirements reachable without running a loop (top level, and inside
// the taken branch of top-level ifs) are checked right after the
// parameters are bound, before any op is evaluated: an unsupported world
// size is then reported at its requirement, with the values that broke
// it, instead of as whatever chunk index goes out of range first. A
// require inside a loop or an `on` block is checked when the evaluation
// reaches it.

// requirements runs the pre-pass and reports whether every requirement
// it reached holds. It evaluates top-level lets and if conditions on a
// throwaway state: their problems are the body's to report, so the
// pre-pass simply stops there and leaves later requirements to the body.
func (ev *evaluator) requirements() bool {
	st := ev.st
	if !hasRequire(st.file.Stmts) {
		return true
	}
	pre := &evaluator{st: st.sub(), hdr: ev.hdr,
		params: ev.params, badParams: ev.badParams, names: ev.names, fns: ev.fns, maxOps: ev.maxOps, maxIt: ev.maxIt}
	ev.checked = map[*dsl.RequireStmt]bool{}
	ok := true
	var walk func(ss []*dsl.Stmt) bool
	walk = func(ss []*dsl.Stmt) bool {
		for _, s := range ss {
			switch {
			case s.Let != nil:
				if !pre.letStmt(s.Let) {
					return false
				}
			case s.If != nil:
				for i := s.If; ; i = i.ElseIf {
					c, good := pre.eval(i.Cond)
					if !good {
						return false
					}
					var body []*dsl.Stmt
					switch {
					case c != 0:
						body = i.Then
					case i.ElseIf != nil:
						continue
					default:
						body = i.Else
					}
					pre.push()
					good = walk(body)
					pre.pop()
					if !good {
						return false
					}
					break
				}
			case s.Require != nil:
				// The condition's own problems (a division by zero) are
				// the requirement's: they move to the real state.
				n := len(pre.st.diags)
				ev.checked[s.Require] = true
				if !pre.require(s.Require) {
					ok = false
				}
				st.diags = append(st.diags, pre.st.diags[n:]...)
			}
		}
		return true
	}
	walk(st.file.Stmts)
	return ok
}

// hasRequire says whether any statement, at any depth, is a require;
// programs without one skip the pre-pass.
func hasRequire(ss []*dsl.Stmt) bool {
	for _, s := range ss {
		switch {
		case s.Require != nil:
			return true
		case s.For != nil && hasRequire(s.For.Body),
			s.On != nil && hasRequire(s.On.Body),
			s.Pipeline != nil && hasRequire(s.Pipeline.Body):
			return true
		case s.If != nil:
			for i := s.If; i != nil; i = i.ElseIf {
				if hasRequire(i.Then) || hasRequire(i.Else) {
					return true
				}
			}
		}
	}
	return false
}

// require evaluates one requirement and reports it when it fails:
// `ranks=6 not supported: MESSAGE (require COND)`, naming the value of
// every name in the condition, so that the reader sees which -D broke it.
func (ev *evaluator) require(rq *dsl.RequireStmt) bool {
	v, ok := ev.eval(rq.Cond)
	if !ok {
		return false
	}
	if v != 0 {
		return true
	}
	msg := "requirement not met"
	if rq.Msg != nil {
		if s, err := strconv.Unquote(*rq.Msg); err == nil {
			msg = s
		} else {
			msg = *rq.Msg
		}
	}
	cond := dsl.ExprString(rq.Cond)
	r := dsl.RangeOf(rq.Pos, rq.EndPos)
	if vals := ev.valuesIn(rq.Cond); vals != "" {
		ev.st.errorc(diag.CodeRequireFailed, r, "", "%s not supported: %s (require %s)", vals, msg, cond)
	} else {
		ev.st.errorc(diag.CodeRequireFailed, r, "", "%s (require %s)", msg, cond)
	}
	return false
}

// valuesIn spells `name=value` for each distinct name in e that has a
// value (params, lets, loop variables), in order of appearance.
func (ev *evaluator) valuesIn(e *dsl.Expr) string {
	var parts []string
	seen := map[string]bool{}
	walkPrims(e, func(p *dsl.Primary) {
		if p.Ident == nil || seen[*p.Ident] {
			return
		}
		name := *p.Ident
		seen[name] = true
		if v, ok := ev.lookup(name); ok {
			parts = append(parts, fmt.Sprintf("%s=%d", name, v))
		}
	})
	return strings.Join(parts, ", ")
}
