package cpu

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// Fixtures are the peer fixtures by file name, for the external tests.
var Fixtures = fixtures

// CheckFastAgrees runs p (keeping every launch) and holds checkFast to
// the full check launch by launch: it must accept the outputs exactly
// when they equal expected's bytes, and refuse them once any one byte of
// an output's defined part is changed (a byte per rank, at an offset
// drawn from seed). It returns how many launches checkFast accepted.
func CheckFastAgrees(p *ir.Plan, opt Options, seed uint64) (int, error) {
	s := &sim{p: p, opt: opt}
	rep, err := s.start()
	if err != nil {
		return 0, err
	}
	ok := 0
	for l := range rep.Outputs {
		want, err := s.expected(rep.Inputs[l])
		if err != nil {
			return 0, err
		}
		equal := true
		for r, got := range rep.Outputs[l] {
			if w, at := want[r], s.outAt(r); w != nil && !bytes.Equal(got[at:at+int64(len(w))], w) {
				equal = false
			}
		}
		if fast := s.checkFast(l); fast != equal {
			return 0, fmt.Errorf("launch %d: checkFast says %v, the full check %v", l, fast, equal)
		}
		if !equal {
			continue
		}
		ok++
		for r, got := range rep.Outputs[l] {
			w, at := want[r], s.outAt(r)
			if w == nil || len(w) == 0 {
				continue
			}
			i := at + int64(splitmix(&seed)%uint64(len(w)))
			got[i] ^= 1 << (splitmix(&seed) % 8)
			fast := s.checkFast(l)
			got[i] = w[i-at]
			if fast {
				return 0, fmt.Errorf("launch %d rank %d: checkFast accepts the output with byte %d changed", l, r, i)
			}
		}
		if !s.checkFast(l) {
			return 0, fmt.Errorf("launch %d: checkFast refuses the restored outputs", l)
		}
	}
	return ok, nil
}

// RunSparse runs p on sparse clocks alone: missed reports that they left
// an access unordered (Run would repeat the run on exact clocks).
func RunSparse(p *ir.Plan, opt Options) (rep *Report, missed bool, err error) {
	rep, err = runMode(p, opt)
	if errors.Is(err, errClockMiss) {
		return nil, true, nil
	}
	return rep, false, err
}
