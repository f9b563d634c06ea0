package compiler

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// The form check between passes catches a pass that leaves the form it
// consumed behind, and passes each pass's proper output.
func TestFormCheck(t *testing.T) {
	byName := map[string]pass{}
	for _, p := range passes {
		byName[p.name] = p
	}
	acts := []*action{{}}
	for _, c := range []struct {
		pass string
		st   state
		f    form
		bad  bool
	}{
		{"evaluate", state{}, form{ops: []*evOp{{}}}, false},
		{"evaluate", state{}, form{ops: []*evOp{{}}, prog: &program{actions: acts}}, true},
		{"lower", state{}, form{prog: &program{actions: acts}}, false},
		{"lower", state{}, form{prog: &program{actions: acts}, ops: []*evOp{{}}}, true},
		{"lower", state{}, form{}, true},
		{"lower", state{}, form{prog: &program{actions: acts, blocks: [][]*block{{}}}}, true},
		{"assign-tbs", state{}, form{prog: &program{actions: acts}}, true},
		{"fuse", state{}, form{prog: &program{actions: acts, blocks: [][]*block{{}}}}, false},
		{"sync", state{plan: &ir.Plan{}}, form{}, false},
		{"sync", state{plan: &ir.Plan{}}, form{prog: &program{blocks: [][]*block{{}}}}, true},
		{"sync", state{plan: &ir.Plan{}}, form{prog: &program{actions: acts}}, true},
		{"sync", state{plan: &ir.Plan{}}, form{prog: &program{actions: acts, explicit: true}}, false},
		{"limits", state{}, form{}, true},
	} {
		ps, ok := byName[c.pass]
		if !ok {
			t.Fatalf("no pass %s", c.pass)
		}
		if msg := c.st.formCheck(ps, c.f); (msg != "") != c.bad {
			t.Errorf("after %s with %+v: %q, want bad=%v", c.pass, c.st, msg, c.bad)
		}
	}
}
