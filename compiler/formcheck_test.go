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
		f    form
		bad  bool
	}{
		{"evaluate", form{ev: &evaluated{}}, false},
		{"evaluate", form{ev: &evaluated{}, prog: &program{actions: acts}}, true},
		{"lower", form{prog: &program{actions: acts}}, false},
		{"lower", form{prog: &program{actions: acts}, ev: &evaluated{}}, true},
		{"lower", form{}, true},
		{"lower", form{prog: &program{actions: acts, blocks: [][]*block{{}}}}, true},
		{"assign-tbs", form{prog: &program{actions: acts}}, true},
		{"fuse", form{prog: &program{actions: acts, blocks: [][]*block{{}}}}, false},
		{"sync", form{built: &built{plan: &ir.Plan{}, sm: &SourceMap{}}}, false},
		{"sync", form{built: &built{plan: &ir.Plan{}, sm: &SourceMap{}}, prog: &program{blocks: [][]*block{{}}}}, true},
		{"sync", form{built: &built{plan: &ir.Plan{}, sm: &SourceMap{}, acts: acts}}, true},
		{"sync", form{built: &built{plan: &ir.Plan{}, sm: &SourceMap{}, acts: acts, explicit: true}}, false},
		{"fuse-sync", form{built: &built{sm: &SourceMap{}}}, true},
		{"limits", form{}, true},
	} {
		ps, ok := byName[c.pass]
		if !ok {
			t.Fatalf("no pass %s", c.pass)
		}
		if msg := formCheck(ps, c.f); (msg != "") != c.bad {
			t.Errorf("after %s with %+v: %q, want bad=%v", c.pass, c.f, msg, c.bad)
		}
	}
}
