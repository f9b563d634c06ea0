package cudaexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/cudadev"
)

// TestGPURankStaged runs OpenRank's ranks (goroutines of this process,
// as TestOpenRankOracle) with StageInKernel on buffers of the caller's:
// each launch's inputs go into a caller's buffer, the kernel (or, where
// peers read inputs, a copy ahead of it) stages them, and the caller's
// output buffer, poisoned first, must hold the CPU executor's output.
// Three launches eagerly, then the same three as replays of one captured
// graph (the kernel node keeps its Stage; the grid barrier's generation
// carries on across launches and replays). Then the staging the kernel
// must refuse. Skips without a driver.
func TestGPURankStaged(t *testing.T) {
	needGPU(t)
	dev := openDevice(t, cudadev.Options{})
	for _, tc := range []struct {
		algo     string
		inKernel bool
	}{
		{"allreduce_allpairs_packet", true},
		{"allreduce_twoshot", false},
		{"allgather_direct", true},
		{"reducescatter_ring", true},
	} {
		t.Run(tc.algo, func(t *testing.T) {
			p := mustCompile(t, tc.algo, map[string]int64{"ranks": 4})
			const launches, size = 3, 64 << 10
			rep, err := cpu.Run(p, cpu.Options{Size: size, DType: ir.F32, Reduce: ir.ReduceSum, Launches: launches})
			if err != nil || !rep.OK() {
				t.Fatalf("CPU executor: %v %v", err, rep)
			}
			errs := commtest.Join(t, []string{"n0", "n0", "n0", "n0"}, dev, 20*time.Second, func(ctx context.Context, c *comm.Comm) error {
				ex, err := OpenRank(ctx, c, p, Options{Timeout: 3 * time.Second, StageInKernel: true})
				if err == nil {
					if got := ex.InputInKernel(); got != tc.inKernel {
						err = fmt.Errorf("InputInKernel %v, want %v", got, tc.inKernel)
					} else {
						err = stagedLaunches(ctx, c, ex, size, rep, launches)
					}
					err = errors.Join(err, ex.Close())
				}
				if err != nil {
					return fmt.Errorf("rank %d: %w", c.Rank(), err)
				}
				return nil
			})
			if err := errors.Join(errs...); err != nil {
				t.Error(err)
			}
		})
	}
}

// openDevice opens the cuda device for t, closed when t ends.
func openDevice(t *testing.T, opt cudadev.Options) *cudadev.Device {
	t.Helper()
	dev, err := cudadev.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	return dev
}

// stagedLaunches is one rank's part of TestGPURankStaged.
func stagedLaunches(ctx context.Context, c *comm.Comm, ex *RankExecutor, size int64, rep *cpu.Report, launches int) (err error) {
	r := c.Rank()
	b, err := ex.Alloc(ctx, size)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Free()) }()
	in, out := b.InBytes(), b.OutBytes()
	uin, err := cuda.Malloc(in)
	if err != nil {
		return err
	}
	defer cuda.Free(uin)
	uout, err := cuda.Malloc(out)
	if err != nil {
		return err
	}
	defer cuda.Free(uout)
	st, err := cuda.NewStream(true)
	if err != nil {
		return err
	}
	defer st.Destroy()
	if err := ex.Prepare(b, ir.F32, ir.ReduceSum, 16); err != nil {
		return err
	}
	inSpan := Span{Dst: uint64(b.Input()), Src: uint64(uin), N: uint64(in)}
	outSpan := Span{Dst: uint64(uout), Src: uint64(b.Output()), N: uint64(out)}
	kernel, before, _ := SplitStaging([]Span{inSpan}, []Span{outSpan}, ex.InputInKernel(), true)
	if len(kernel.Out) != 1 || len(kernel.In)+len(before) != 1 {
		return fmt.Errorf("SplitStaging gave the kernel %d+%d spans, the copy engine %d before", len(kernel.In), len(kernel.Out), len(before))
	}
	launch := func() error {
		for _, x := range before {
			if err := cuda.MemcpyAsync(cuda.DevicePtr(x.Dst), cuda.DevicePtr(x.Src), int64(x.N), st); err != nil {
				return err
			}
		}
		return ex.EnqueueStaged(b, ir.F32, ir.ReduceSum, 16, st, kernel)
	}
	// step feeds launch k's inputs to the caller's buffer, poisons the
	// caller's output, runs run and checks the output.
	step := func(k int, what string, run func() error) error {
		if err := cuda.MemcpyHtoD(uin, rep.Inputs[k][r]); err != nil {
			return err
		}
		if err := cuda.Memset8(uout, 0xEE, out); err != nil {
			return err
		}
		if err := run(); err != nil {
			return fmt.Errorf("%s %d: %w", what, k, err)
		}
		if err := errors.Join(st.Synchronize(), ex.Wait()); err != nil {
			return fmt.Errorf("%s %d: %w", what, k, err)
		}
		got := make([]byte, out)
		if err := cuda.MemcpyDtoH(got, uout); err != nil {
			return err
		}
		want := rep.Outputs[k][r]
		lo, hi := cpu.DefinedOutput(ex.Plan(), r, int64(len(rep.Inputs[k][0])), int64(len(want)))
		if !bytes.Equal(got[lo:hi], want[lo:hi]) {
			i := lo
			for got[i] == want[i] {
				i++
			}
			return fmt.Errorf("%s %d: the caller's output differs from the CPU executor's from byte %d (of [%d, %d))", what, k, i, lo, hi)
		}
		// Nobody stages a new input while a peer's kernel may still read
		// this rank's registered one.
		return c.Bootstrap().Barrier(ctx)
	}
	for k := 0; k < launches; k++ {
		if err := step(k, "launch", launch); err != nil {
			return err
		}
	}
	ge, err := captureStaged(st, launch)
	if err != nil {
		return err
	}
	defer ge.Destroy()
	for k := 0; k < launches; k++ {
		if err := step(k, "replay", func() error { return ge.Launch(st) }); err != nil {
			return err
		}
	}
	// Refused before anything is queued (every rank alike).
	many := make([]Span, kernels.StageSpans+1)
	for i := range many {
		many[i] = outSpan
	}
	for _, bad := range []struct {
		st   Staging
		want string
	}{
		{Staging{Out: many}, "at most"},
		{Staging{Out: []Span{{Dst: outSpan.Dst, Src: outSpan.Src + 16, N: outSpan.N}}}, "outside"},
		{Staging{In: []Span{{Dst: inSpan.Dst - 16, Src: inSpan.Src, N: 16}}}, "input"},
	} {
		if err := ex.EnqueueStaged(b, ir.F32, ir.ReduceSum, 16, st, bad.st); err == nil || !bytes.Contains([]byte(err.Error()), []byte(bad.want)) {
			return fmt.Errorf("staging %+v: %v, want an error saying %q", bad.st, err, bad.want)
		}
	}
	return nil
}

// captureStaged captures one launch on st into a graph (thread-local
// capture, so the OS thread stays locked until it ends).
func captureStaged(st *cuda.Stream, launch func() error) (*cuda.GraphExec, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := st.BeginCapture(); err != nil {
		return nil, err
	}
	lerr := launch()
	g, err := st.EndCapture()
	if err := errors.Join(lerr, err); err != nil {
		return nil, fmt.Errorf("capturing the staged launch: %w", err)
	}
	defer g.Destroy()
	return g.Instantiate()
}
