package compiler

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// The form check between passes catches a pass that leaves the form it
// consumed behind or returns another form than the table says, and passes
// each pass's proper output.
func TestFormCheck(t *testing.T) {
	byName := map[string]pass{}
	for _, p := range passes {
		byName[p.name] = p
	}
	acts := []*action{{}}
	blocks := [][]*block{{}}
	plan := func(b built) *built { b.plan, b.sm = &ir.Plan{}, &SourceMap{}; return &b }
	for _, c := range []struct {
		pass string
		f    form
		bad  bool
	}{
		{"evaluate", form{ev: &evaluated{}}, false},
		{"evaluate", form{}, true},
		{"evaluate", form{ev: &evaluated{}, prog: &program{actions: acts}}, true},
		{"lower", form{prog: &program{actions: acts}}, false},
		{"lower", form{prog: &program{actions: acts}, ev: &evaluated{}}, true},
		{"lower", form{ev: &evaluated{}}, true},
		{"lower", form{prog: &program{actions: acts, blocks: blocks}}, true},
		{"assign-tbs", form{prog: &program{actions: acts}}, true},
		{"assign-tbs", form{prog: &program{actions: acts, blocks: blocks}}, false},
		{"fuse", form{prog: &program{actions: acts, blocks: blocks}}, false},
		{"fuse", form{built: plan(built{})}, true},
		{"sync", form{built: plan(built{})}, false},
		{"sync", form{prog: &program{blocks: blocks}}, true},
		{"sync", form{built: plan(built{}), prog: &program{blocks: blocks}}, true},
		{"sync", form{built: plan(built{acts: acts})}, true},
		{"sync", form{built: plan(built{acts: acts, explicit: true})}, false},
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

// Each pass takes the form the one before returns, the first the parsed
// program, and the last returns the plan Compile hands out.
func TestPassChain(t *testing.T) {
	want := formFile
	for _, p := range passes {
		if p.in != want {
			t.Errorf("pass %s takes %v, but the pass before returns %v", p.name, p.in, want)
		}
		want = p.out
	}
	if want != formPlan {
		t.Errorf("the last pass returns %v, want %v", want, formPlan)
	}
}
