package cpu

import (
	"fmt"
	"math"
	"runtime/metrics"

	"github.com/msccl-go/msccl-go/ir"
)

// A run first checks races on sparse clocks (sparseclock.go), whose
// entries per clock do not grow with the agents, so the whole run (its
// access history, clocks and setup's resolution of every op, which it
// drops once checked) grows with the ops alone. Measured on the
// library's ring allreduce (symbolic run, 4 launches, in process) as
// the peak of the heap's object bytes above what the plan held before
// the run, the figure checkHeap holds against the cap, while setup still
// kept the resolved ops: 1.1 KiB per op at 64 ranks, 0.94 at 128, 0.88
// at 256, 0.62-0.77 at 512; sparseBytesPerOp stays above them, and
// keeps a 1024-rank ring's two runs (12.2 GB estimated each) one after
// the other under a 16 GiB cap.
//
// A run its sparse clocks cannot decide is repeated on the exact clocks
// (clock.go): every op that changes a block's clock copies a path of
// the clock's tree, and the race detector keeps a snapshot per access
// range, so what they hold grows with the ops run and, per op, with the
// agents (blocks, proxies and hosts) whose entries change. Measured the
// same way on the ring: 2.1 KiB per op at 64 ranks (2 k agents), 2.8
// KiB at 128 (8 k), 4.7 KiB at 256 (33 k). The fit below stays 11-24%
// above those points, so that a run the estimate lets start is not
// then stopped by checkHeap.
//
// Run setup refuses a plan whose estimate is past Options.MaxMemory
// before a clock exists.
//
// Estimates: sparse, ops × sparseBytesPerOp; exact, ops ×
// (clockBytesPerOp + agents/clockAgentsPerByte).
const (
	sparseBytesPerOp   = 896
	clockBytesPerOp    = 2304
	clockAgentsPerByte = 9
)

// ClockMemory estimates the bytes the happens-before clocks of a run of
// p reach (the buffers come on top: BufferMemory): the sparse clocks'
// estimate, which is what a run needs unless they leave an access
// undecided (then the repeat on exact clocks is held to
// ExactClockMemory). It saturates rather than overflow.
func ClockMemory(p *ir.Plan) int64 {
	ops, _ := planOps(p)
	if ops > (1<<62)/sparseBytesPerOp {
		return 1 << 62
	}
	return ops * sparseBytesPerOp
}

// ExactClockMemory estimates the bytes the exact clocks of a run of p
// reach. It saturates rather than overflow.
func ExactClockMemory(p *ir.Plan) int64 {
	ops, agents := planOps(p)
	per := clockBytesPerOp + agents/clockAgentsPerByte
	if ops > 0 && per > (1<<62)/ops {
		return 1 << 62
	}
	return ops * per
}

// planOps counts p's ops (a pipeline and each op of its body) and the
// agents of its clocks.
func planOps(p *ir.Plan) (ops, agents int64) {
	maxTB := 0
	for r := range p.GPUs {
		maxTB = max(maxTB, len(p.GPUs[r].ThreadBlocks))
		for t := range p.GPUs[r].ThreadBlocks {
			for i := range p.GPUs[r].ThreadBlocks[t].Ops {
				ops += 1 + int64(len(p.GPUs[r].ThreadBlocks[t].Ops[i].Ops()))
			}
		}
	}
	return ops, int64(maxTB+2) * int64(len(p.GPUs))
}

// MemoryError is a run refused, or stopped, for memory: Need is the
// estimate (or, when Held, what the heap held when the run was stopped)
// and Max the cap (Options.MaxMemory).
type MemoryError struct {
	Need, Max int64
	Held      bool
}

func (e *MemoryError) Error() string {
	if e.Held {
		return fmt.Sprintf("the run was stopped holding %s of memory, past its %s cap", human(e.Need), human(e.Max))
	}
	return fmt.Sprintf("the run needs about %s of memory for its ops and happens-before clocks, past its %s cap", human(e.Need), human(e.Max))
}

// human prints a byte count to a tenth of its binary unit.
func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// maxMemory is the run's cap: Options.MaxMemory, or 16 GiB.
func (s *sim) maxMemory() int64 {
	if s.opt.MaxMemory > 0 {
		return s.opt.MaxMemory
	}
	return 16 << 30
}

// checkClockMemory refuses the run before its clocks are made when their
// estimate is past the cap.
func (s *sim) checkClockMemory() error {
	need := ClockMemory(s.p)
	if s.opt.exactClocks {
		need = ExactClockMemory(s.p)
	}
	if need > s.maxMemory() {
		return &MemoryError{Need: need, Max: s.maxMemory()}
	}
	return nil
}

// heapCheckSteps is how often (in op executions) a run reads the heap:
// the estimate is a fit, and a plan unlike those it was fitted on must
// still stop with an error rather than be killed.
const heapCheckSteps = 1 << 16

// checkHeap stops the run when the process's heap holds more than the
// cap. (The heap is the process's: runs in parallel share the cap.)
func (s *sim) checkHeap() error {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return nil
	}
	if held := int64(sample[0].Value.Uint64()); held > s.maxMemory() {
		return &MemoryError{Need: held, Max: s.maxMemory(), Held: true}
	}
	return nil
}

// BufferMemory estimates the bytes the CPU executor allocates to run
// plan p at msg bytes over launches launches, the way setup counts them
// before it allocates (per rank: input and output, a snapshot of each
// per kept launch, and scratch with its packet store); streaming
// (Options.OnLaunch) keeps at most two launches. It saturates at
// MaxInt64 rather than overflow. Callers hold it against a host budget
// (internal/hostmem) before a run.
func BufferMemory(p *ir.Plan, msg int64, launches int, streaming bool) (int64, error) {
	in, out, err := p.BufferBytes(msg)
	if err != nil {
		return 0, err
	}
	kept := int64(launches)
	if streaming {
		kept = min(kept, 2)
	}
	var total int64
	for r := range p.GPUs {
		lay, err := p.Layout(r, in, out)
		if err != nil {
			return 0, fmt.Errorf("gpus[%d]: %w", r, err)
		}
		total = addSat(total, mulSat(addSat(in, out), 1+2*kept))
		total = addSat(total, mulSat(lay.ScratchAlloc, 3)/2)
		if lay.ScratchAlloc < 0 {
			total = math.MaxInt64
		}
	}
	return total, nil
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
