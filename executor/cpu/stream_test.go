package cpu

import (
	"bytes"
	"errors"
	"testing"
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
