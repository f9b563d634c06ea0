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
		bad  bool
	}{
		{"evaluate", state{ops: []*evOp{{}}}, false},
		{"evaluate", state{ops: []*evOp{{}}, actions: acts}, true},
		{"lower", state{actions: acts}, false},
		{"lower", state{actions: acts, ops: []*evOp{{}}}, true},
		{"fuse", state{actions: acts, blocks: [][]*block{{}}}, false},
		{"sync", state{plan: &ir.Plan{}}, false},
		{"sync", state{plan: &ir.Plan{}, blocks: [][]*block{{}}}, true},
		{"sync", state{plan: &ir.Plan{}, actions: acts}, true},
		{"sync", state{plan: &ir.Plan{}, actions: acts, explicit: true}, false},
		{"limits", state{}, true},
	} {
		ps, ok := byName[c.pass]
		if !ok {
			t.Fatalf("no pass %s", c.pass)
		}
		if msg := c.st.formCheck(ps); (msg != "") != c.bad {
			t.Errorf("after %s with %+v: %q, want bad=%v", c.pass, c.st, msg, c.bad)
		}
	}
}
