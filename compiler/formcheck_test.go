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
		{"evaluate", state{actions: acts}, form{ops: []*evOp{{}}}, true},
		{"lower", state{actions: acts}, form{}, false},
		{"lower", state{actions: acts}, form{ops: []*evOp{{}}}, true},
		{"fuse", state{actions: acts, blocks: [][]*block{{}}}, form{}, false},
		{"sync", state{plan: &ir.Plan{}}, form{}, false},
		{"sync", state{plan: &ir.Plan{}, blocks: [][]*block{{}}}, form{}, true},
		{"sync", state{plan: &ir.Plan{}, actions: acts}, form{}, true},
		{"sync", state{plan: &ir.Plan{}, actions: acts, explicit: true}, form{}, false},
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
