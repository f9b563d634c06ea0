package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
)

func loadPlan(t *testing.T, path string) *ir.Plan {
	t.Helper()
	p, _, err := ir.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A plan whose blocks wait before they signal ends with the watchdog's
// report of every stuck block, on every rank, within the timeout.
func TestWatchdog(t *testing.T) {
	p := loadPlan(t, "../../testdata/broken/sim/circular_waits.json")
	start := time.Now()
	errs := execRanks(t, 2, 5*time.Second, onNode0, p, Options{Timeout: 300 * time.Millisecond}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
		b, err := ex.Alloc(ctx, 4096)
		if err != nil {
			return err
		}
		defer b.Free()
		return ex.Run(ctx, b, cpu.F32, ir.ReduceSum)
	})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v with a 300ms watchdog", d)
	}
	for r, err := range errs {
		var h *HangError
		if !errors.As(err, &h) {
			t.Fatalf("rank %d: %v, want a HangError", r, err)
		}
		if h.Rank != r || h.Cause != nil || len(h.Stuck) != 1 || h.Frozen != nil {
			t.Fatalf("rank %d: %+v", r, h)
		}
		s := h.Stuck[0]
		want := "signal #1 on memory channel 0 of rank " + string(rune('0'+r)) + " (peer rank " + string(rune('1'-r)) + "), 0 arrived"
		if s.At != "gpus["+string(rune('0'+r))+"].threadblocks[0].ops[0]" || s.Op != "rlxwait" || s.Waiting != want || !s.TimedOut {
			t.Errorf("rank %d: stuck %+v, want ops[0] rlxwait waiting for %q", r, s, want)
		}
		if !strings.Contains(err.Error(), "watchdog: a wait ran past 300ms") || ir.ErrorCode(err) != ir.CodeWatchdog {
			t.Errorf("rank %d: %v (code %q)", r, err, ir.ErrorCode(err))
		}
	}
}

// Refusals before anything runs.
func TestRunErrors(t *testing.T) {
	p := compile(t, "allreduce_ring", 2)
	commtest.Check(t, ranks(t, 2, 5*time.Second, func(ctx context.Context, c *comm.Comm) error {
		ex, err := Open(ctx, c, p, Options{})
		if err != nil {
			return err
		}
		if _, err := ex.Alloc(ctx, 3); ir.ErrorCode(err) != ir.CodeSizeRefused {
			t.Errorf("Alloc(3): %v", err)
		}
		b, err := ex.Alloc(ctx, 4096)
		if err != nil {
			return err
		}
		if sc := b.views[c.Rank()].scratch; len(sc) == 0 || strings.Trim(string(sc), "\xff") != "" {
			t.Errorf("rank %d: scratch of %d bytes is not all poison", c.Rank(), len(sc))
		}
		if err := ex.Run(ctx, b, cpu.F32, ir.ReduceProd); ir.ErrorCode(err) != ir.CodeBadOptions {
			t.Errorf("prod on f32: %v", err)
		}
		b.Free()
		if err := ex.Run(ctx, b, cpu.F32, ir.ReduceSum); err == nil || !strings.Contains(err.Error(), "freed") || ir.ErrorCode(err) != ir.CodeBroken {
			t.Errorf("Run on freed buffers: %v", err)
		}
		ex.Close()
		if err := ex.Run(ctx, b, cpu.F32, ir.ReduceSum); ir.ErrorCode(err) != ir.CodeBroken {
			t.Errorf("Run after Close: %v", err)
		}
		if _, err := Open(ctx, c, compile(t, "allreduce_ring", 3), Options{}); err == nil || !strings.Contains(err.Error(), "has 3 ranks, the job has 2") || ir.ErrorCode(err) != ir.CodeRanks {
			t.Errorf("Open of a 3-rank plan in a 2-rank job: %v", err)
		}
		return nil
	}))
}

func countDir(t *testing.T, dir string) int {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("%s: %v", dir, err)
	}
	return len(es)
}

// Four ranks run and close: this process holds no more descriptors and
// /dev/shm no more names than before.
func TestNoLeaks(t *testing.T) {
	p := compile(t, "allreduce_allpairs_packet", 4)
	runChecked(t, p, 4096, cpu.F32, ir.ReduceSum, 1) // warm: goroutines and caches of the runtime
	fds, shm := countDir(t, "/proc/self/fd"), countDir(t, "/dev/shm")
	runChecked(t, p, 8192, cpu.I32, ir.ReduceSum, 2)
	deadline := time.Now().Add(2 * time.Second)
	for countDir(t, "/proc/self/fd") != fds && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // sockets close on their goroutines
	}
	if got := countDir(t, "/proc/self/fd"); got != fds {
		t.Errorf("open descriptors: %d before, %d after", fds, got)
	}
	if got := countDir(t, "/dev/shm"); got != shm {
		t.Errorf("/dev/shm entries: %d before, %d after", shm, got)
	}
}

// Ranks that allocate for different sizes are told so before anything
// is shared.
func TestAllocDifferentSizes(t *testing.T) {
	p := compile(t, "allreduce_ring", 2)
	errs := execRanks(t, 2, 5*time.Second, onNode0, p, Options{}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
		_, err := ex.Alloc(ctx, int64(4096*(1+c.Rank())))
		return err
	})
	for r, err := range errs {
		want := fmt.Sprintf("comm: rank %d has message size %d but rank %d has %d: every rank must use the same", r, 4096*(1+r), 1-r, 4096*(2-r))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v, want %q", r, err, want)
		}
	}
}
