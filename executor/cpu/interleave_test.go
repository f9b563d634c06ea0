package cpu

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestInterleavingIndependent runs every fixture and broken plan under
// shuffled schedules: the verdict must not change, and correct plans must
// produce the same bytes.
func TestInterleavingIndependent(t *testing.T) {
	plans := fixtures(t)
	for _, c := range brokenCases {
		plans["broken/"+c.file] = loadPlan(t, filepath.Join(brokenDir, c.file))
	}
	for name, p := range collectivePlans() {
		plans["direct/"+name] = p
	}
	for _, name := range sortedNames(plans) {
		p := plans[name]
		opt := Options{Size: sizes(p)[0] * 4, DType: F16}
		if p.Collective != "allgather" {
			opt.Size = int64(p.BufferAlignment) * 16 * 64
		}
		base, err := Run(p, opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for seed := uint64(1); seed <= 6; seed++ {
			o := opt
			o.sched = seed
			rep, err := Run(p, o)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if rep.Verdict != base.Verdict || len(rep.Deadlocks) > 0 != (len(base.Deadlocks) > 0) || len(rep.Races) > 0 != (len(base.Races) > 0) {
				t.Fatalf("%s schedule %d: verdict %s, default schedule %s\n%s", name, seed, rep.Verdict, base.Verdict, rep)
			}
			if base.OK() {
				for l := range base.Outputs {
					for r := range base.Outputs[l] {
						if !bytes.Equal(base.Outputs[l][r], rep.Outputs[l][r]) {
							t.Fatalf("%s schedule %d: launch %d rank %d output differs", name, seed, l, r)
						}
					}
				}
			}
		}
	}
}
