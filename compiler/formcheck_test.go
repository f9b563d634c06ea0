package compiler

import (
	"reflect"
	"testing"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// The hand-off check catches what a pass's type does not: nothing
// returned, a program out of blocks after the placer or in blocks before
// it, a plan without its source map, a chunk-level program's actions kept
// with the plan; and passes each pass's proper output.
func TestHandoffCheck(t *testing.T) {
	byName := map[string]pass{}
	for _, p := range passes {
		byName[p.name] = p
	}
	acts := []*action{{}}
	blocks := [][]*block{{}}
	plan := func(b built) *built { b.plan, b.sm = &ir.Plan{}, &SourceMap{}; return &b }
	for _, c := range []struct {
		pass   string
		placed bool
		v      any
		bad    bool
	}{
		{"evaluate", false, &evaluated{}, false},
		{"evaluate", false, (*evaluated)(nil), true},
		{"lower", false, &program{actions: acts}, false},
		{"lower", false, &program{actions: acts, blocks: blocks}, true},
		{"lower", false, (*program)(nil), true},
		{"assign-tbs", true, &program{actions: acts}, true},
		{"assign-tbs", true, &program{actions: acts, blocks: blocks}, false},
		{"fuse", true, &program{actions: acts, blocks: blocks}, false},
		{"sync", true, plan(built{}), false},
		{"sync", true, plan(built{acts: acts}), true},
		{"sync", true, plan(built{acts: acts, explicit: true}), false},
		{"fuse-sync", true, &built{sm: &SourceMap{}}, true},
		{"limits", true, nil, true},
	} {
		ps, ok := byName[c.pass]
		if !ok {
			t.Fatalf("no pass %s", c.pass)
		}
		if msg := handoffCheck(ps, c.placed, c.v); (msg != "") != c.bad {
			t.Errorf("after %s with %+v: %q, want bad=%v", c.pass, c.v, msg, c.bad)
		}
	}
}

// Each pass takes what the one before returns, the first the parsed
// program, and the last returns the plan Compile hands out; the placer
// is in the table.
func TestPassChain(t *testing.T) {
	want := reflect.TypeFor[*dsl.File]()
	placer := false
	for _, p := range passes {
		if p.in != want {
			t.Errorf("pass %s takes %v, but the pass before returns %v", p.name, p.in, want)
		}
		want = p.out
		placer = placer || p.name == placerPass
	}
	if want != reflect.TypeFor[*built]() {
		t.Errorf("the last pass returns %v, want *built", want)
	}
	if !placer {
		t.Errorf("no pass %s", placerPass)
	}
}
