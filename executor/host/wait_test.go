package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// Blocks run as coroutines on the caller's thread up to inlineMax bytes
// and each on a goroutine above it; both give the CPU executor's
// results, for plans whose blocks wait on each other's peers (all-pairs
// LL) and on barriers and signals (two-shot).
func TestBlocksInlineAndGoroutines(t *testing.T) {
	for _, algo := range []string{"allreduce_allpairs_packet", "allreduce_twoshot"} {
		p := compile(t, algo, 4)
		for _, size := range []int64{admittedSize(t, p, 1024), admittedSize(t, p, inlineMax-4096), admittedSize(t, p, inlineMax+1)} {
			t.Run(fmt.Sprintf("%s/%d", algo, size), func(t *testing.T) {
				runChecked(t, p, size, cpu.F32, ir.ReduceSum, 3)
			})
		}
	}
}

// The watchdog names the same stuck blocks at the same ops whether the
// blocks ran as coroutines or as goroutines: rank 3 of an all-pairs
// allreduce never runs, so every block of the other ranks waits (for
// rank 3's packets, or for a chunk that a stuck rank reduces) until the
// watchdog stops them all. What each waited for names packet offsets,
// which scale with the size, so only its kind is compared.
func TestWatchdogInlineAndGoroutines(t *testing.T) {
	p := compile(t, "allreduce_allpairs_packet", 4)
	report := func(size int64) []string {
		var out []string
		errs := execRanks(t, 4, 10*time.Second, onNode0, p, Options{Timeout: 200 * time.Millisecond}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
			b, err := ex.Alloc(ctx, size)
			if err != nil {
				return err
			}
			defer b.Free()
			if c.Rank() == 3 {
				time.Sleep(1500 * time.Millisecond) // alive, but not running
				return nil
			}
			return ex.Run(ctx, b, cpu.F32, ir.ReduceSum)
		})
		for r, err := range errs[:3] {
			var h *HangError
			if !errors.As(err, &h) || h.Cause != nil || !strings.Contains(err.Error(), "watchdog: a wait ran past 200ms") {
				t.Fatalf("size %d: rank %d: %v, want a watchdog HangError", size, r, err)
			}
			for _, s := range h.Stuck {
				what, _, _ := strings.Cut(s.Waiting, " at ")
				out = append(out, fmt.Sprintf("rank %d: %s (%s) waits for %s", r, s.At, s.Op, what))
			}
		}
		slices.Sort(out)
		return out
	}
	in, gr := report(1024), report(admittedSize(t, p, inlineMax+1))
	if len(in) != 3*4 || !slices.Equal(in, gr) {
		t.Errorf("stuck blocks, want all 4 of ranks 0-2 both ways:\ninline:     %q\ngoroutines: %q", in, gr)
	}
}

// A small collective on a goroutine locked to its thread (as every call
// from C into Go is), with the context saying so, does not put that thread to sleep to wait for its
// blocks or its peers: each such sleep is a hand-off between OS threads
// that cost more than the whole call. The thread's voluntary context
// switches (RUSAGE_THREAD) count the sleeps; a few are allowed for a
// peer that was off its core longer than the yielding phase lasts.
func TestSmallRunKeepsItsThread(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("two in-process ranks on locked threads need a P each")
	}
	const launches = 400
	p := compile(t, "allreduce_allpairs_packet", 2)
	switches := make([]int64, 2)
	commtest.Check(t, execRanks(t, 2, 10*time.Second, onNode0, p, Options{}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
		b, err := ex.Alloc(ctx, 1024)
		if err != nil {
			return err
		}
		defer b.Free()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ctx = cpudev.WithLockedThread(ctx)
		for range 20 { // warm: the runtime's first goroutines and stacks
			if err := ex.Run(ctx, b, cpu.F32, ir.ReduceSum); err != nil {
				return err
			}
		}
		before := threadSwitches()
		for range launches {
			if err := ex.Run(ctx, b, cpu.F32, ir.ReduceSum); err != nil {
				return err
			}
		}
		switches[c.Rank()] = threadSwitches() - before
		return nil
	}))
	for r, n := range switches {
		t.Logf("rank %d: %d voluntary context switches in %d launches", r, n, launches)
		// Parking on every wait slept 368-380 times in 400 launches; the
		// inline launch sleeps 0-21 times on a quiet 2-core machine and
		// 111 under .ci/run's parallel packages, where the backoff's
		// yields find no idle core and it falls back to sleeping.
		if n > launches*3/4 {
			t.Errorf("rank %d: the calling thread slept %d times in %d launches of 1 KiB", r, n, launches)
		}
	}
}

// threadSwitches is the calling thread's voluntary context switches.
func threadSwitches() int64 {
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return ru.Nvcsw
}

// BenchmarkRunSmall is one launch of a 1 KiB all-pairs allreduce on 2
// in-process ranks, each on a locked thread as a C caller's is: the
// host time of a small launch without the communicator's call path.
func BenchmarkRunSmall(b *testing.B) {
	p := compile(b, "allreduce_allpairs_packet", 2)
	commtest.Check(b, execRanks(b, 2, 10*time.Second, onNode0, p, Options{}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
		bufs, err := ex.Alloc(ctx, 1024)
		if err != nil {
			return err
		}
		defer bufs.Free()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ctx = cpudev.WithLockedThread(ctx)
		for range b.N {
			if err := ex.Run(ctx, bufs, cpu.F32, ir.ReduceSum); err != nil {
				return err
			}
		}
		return nil
	}))
}
