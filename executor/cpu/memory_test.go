package cpu

import (
	"errors"
	"math"
	"path/filepath"
	"testing"
)

// TestClockMemoryRefusal: a run whose clock estimate is past
// Options.MaxMemory is refused with a MemoryError before it runs (the
// 512-rank ring was killed at 10.7 GB, mid-proof), and a run whose heap
// grows past the cap is stopped with one.
func TestClockMemoryRefusal(t *testing.T) {
	p := loadPlan(t, filepath.Join(fixtureDir, "allreduce.json"))
	need := ClockMemory(p)
	if need <= 0 {
		t.Fatalf("ClockMemory = %d", need)
	}
	for _, sym := range []bool{false, true} {
		_, err := Run(p, Options{Size: 8 << 10, DType: F32, Symbolic: sym, MaxMemory: need - 1})
		var me *MemoryError
		if !errors.As(err, &me) || me.Held || me.Need != need || me.Max != need-1 {
			t.Errorf("symbolic %v, cap one byte under the estimate: got %v, want a MemoryError", sym, err)
		}
		rep, err := Run(p, Options{Size: 8 << 10, DType: F32, Symbolic: sym, MaxMemory: 1 << 30})
		if err != nil || !rep.OK() {
			t.Errorf("symbolic %v under 1 GiB: %v %v", sym, err, rep)
		}
	}
	s := &sim{opt: Options{MaxMemory: 1}}
	var me *MemoryError
	if err := s.checkHeap(); !errors.As(err, &me) || !me.Held {
		t.Errorf("heap check under a 1-byte cap: got %v", err)
	}
}

// TestBufferMemory: streaming keeps fewer launches, and the largest
// admitted size saturates instead of wrapping negative.
func TestBufferMemory(t *testing.T) {
	p := loadPlan(t, filepath.Join(fixtureDir, "allreduce_packet.json"))
	small, err := BufferMemory(p, 1<<20, 4, false)
	if err != nil || small <= 0 {
		t.Fatalf("BufferMemory at 1MiB: %d, %v", small, err)
	}
	if n, _ := BufferMemory(p, 1<<20, 4, true); n >= small {
		t.Fatalf("streaming need %d not below %d", n, small)
	}
	// The largest admitted size saturates instead of wrapping negative.
	big := int64(math.MaxInt64) / 64 * 64
	if n, err := BufferMemory(p, big, 4, false); err == nil && n != math.MaxInt64 {
		t.Fatalf("BufferMemory at %d = %d, want saturation at MaxInt64", big, n)
	}
}

// TestMaxStepsDefault: the default step bound leaves room for every op of
// the plan in every launch on top of 50 million (a 1024-rank ring runs
// 54.5 million ops in 4 launches, past a flat 50 million).
func TestMaxStepsDefault(t *testing.T) {
	p := loadPlan(t, filepath.Join(fixtureDir, "allreduce.json"))
	ops, _ := planOps(p)
	s := &sim{p: p, opt: Options{Size: 8 << 10, DType: F32, Launches: 4}}
	if err := s.options(); err != nil {
		t.Fatal(err)
	}
	if want := 50_000_000 + 4*ops; s.maxSteps != want {
		t.Errorf("default MaxSteps = %d, want %d", s.maxSteps, want)
	}
	s = &sim{p: p, opt: Options{Size: 8 << 10, DType: F32, MaxSteps: 7}}
	if err := s.options(); err != nil || s.maxSteps != 7 {
		t.Errorf("MaxSteps 7: got %d, %v", s.maxSteps, err)
	}
}
