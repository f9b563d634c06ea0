package cpu

import (
	"bytes"
	"errors"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestOnLaunchStreams checks that a streaming run hands over exactly the
// inputs and outputs a keeping run records, launch by launch, keeps none
// of them, and stops at the first error of the callback.
func TestOnLaunchStreams(t *testing.T) {
	plans := fixtures(t)
	for _, name := range sortedNames(plans) {
		p := plans[name]
		t.Run(name, func(t *testing.T) {
			opt := Options{Size: 96 << 10, DType: BF16, Launches: 5}
			keep, err := Run(p, opt)
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			opt.OnLaunch = func(l int, ins, outs [][]byte) error {
				if l != seen {
					t.Errorf("launch %d handed over when %d was expected", l, seen)
				}
				seen++
				for r := range ins {
					if !bytes.Equal(ins[r], keep.Inputs[l][r]) || !bytes.Equal(outs[r], keep.Outputs[l][r]) {
						t.Errorf("launch %d rank %d: streamed data differs from the kept", l, r)
					}
				}
				return nil
			}
			st, err := Run(p, opt)
			if err != nil {
				t.Fatal(err)
			}
			if seen != 5 || st.Inputs[0] != nil || st.Outputs[4] != nil {
				t.Errorf("%d launches handed over, report keeps inputs %v", seen, st.Inputs[0] != nil)
			}
			if st.Verdict != keep.Verdict || st.WrongTotal != keep.WrongTotal || len(st.Races) != len(keep.Races) {
				t.Errorf("streaming verdict %s (%d wrong), keeping %s (%d wrong)", st.Verdict, st.WrongTotal, keep.Verdict, keep.WrongTotal)
			}
			stop := errors.New("stop")
			opt.OnLaunch = func(l int, _, _ [][]byte) error {
				if l == 1 {
					return stop
				}
				return nil
			}
			if _, err := Run(p, opt); !errors.Is(err, stop) {
				t.Errorf("callback error not returned: %v", err)
			}
		})
	}
}

// TestOnLaunchInputs: a stream that hands over only the first launch's
// inputs (Options.OnLaunchInputs) reports exactly what a keeping run
// reports, and streams the same outputs, on the fixtures, on result-only
// mutants of the library plans (wrong results, from the fast check's
// fallback) and on a plan that overwrites its input (the clobber check
// reads the recipe); launch 0's inputs are Input's, later ones nil while
// the launch is right.
func TestOnLaunchInputs(t *testing.T) {
	type named struct {
		name string
		p    *ir.Plan
	}
	var cases []named
	for name, p := range fixtures(t) {
		cases = append(cases, named{name, p})
	}
	plans := symPlans(t)
	for _, name := range sortedNames(plans) {
		if _, racy := knownRacy[name]; racy {
			continue
		}
		for _, m := range dataMutations(plans[name], 3) {
			q := clonePlan(plans[name])
			m.apply(q)
			cases = append(cases, named{name + "/" + m.name, q})
		}
	}
	cases = append(cases, named{"clobbering allgather", clobberingAllGather()})
	wrong := 0
	for _, c := range cases {
		size := sizes(c.p)[0] * 4
		for _, dt := range []DType{F32, I32, F8E4M3} {
			opt := Options{Size: size, DType: dt, Launches: 3, Seed: 3}
			keep, err := Run(c.p, opt)
			if err != nil {
				continue
			}
			if !keep.OK() {
				wrong++
			}
			opt.OnLaunchInputs = 1
			opt.OnLaunch = func(l int, ins, outs [][]byte) error {
				for r := range outs {
					if !bytes.Equal(outs[r], keep.Outputs[l][r]) {
						t.Errorf("%s %s launch %d rank %d: streamed output differs from the kept", c.name, dt, l, r)
					}
					if l == 0 && !bytes.Equal(ins[r], keep.Inputs[0][r]) {
						t.Errorf("%s %s rank %d: launch 0's input differs from the kept", c.name, dt, r)
					}
					if l > 0 && keep.OK() && ins[r] != nil {
						t.Errorf("%s %s launch %d rank %d: input handed over past OnLaunchInputs", c.name, dt, l, r)
					}
				}
				return nil
			}
			st, err := Run(c.p, opt)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, dt, err)
			}
			if got, want := st.String(), keep.String(); got != want {
				t.Errorf("%s %s: streaming report\n%s\nkeeping report\n%s", c.name, dt, got, want)
			}
		}
	}
	if wrong == 0 {
		t.Error("no case had a wrong result: the fallback went untested")
	}
	t.Logf("%d plans, %d wrong runs", len(cases), wrong)
}
