package comm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/executor/host"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// A peer that closes while this rank still runs a collective with it is
// reported as closed, naming it, within a second: the wait gives up on
// Dead, not on the 10 s watchdog.
func TestClosedPeerMidCollective(t *testing.T) {
	rank1Leaves(t, func(*comm.Comm) error { return nil }, func(err error) error {
		var pe *bootstrap.PeerError
		switch {
		case !errors.As(err, &pe) || pe.Rank != 1 || !pe.Closed:
			return fmt.Errorf("run: %v, want rank 1 named as closed", err)
		case !strings.Contains(err.Error(), "rank 1 has closed"):
			return fmt.Errorf("run: %v, want it to say rank 1 has closed", err)
		}
		return nil
	})
}

// rank1Leaves runs a two-rank ring allreduce in which rank 1 calls leave
// and then leaves (Join closes its communicator) instead of running;
// rank 0's run must end within a second with an error that check
// accepts.
func rank1Leaves(t *testing.T, leave func(c *comm.Comm) error, check func(err error) error) {
	src, _ := algorithms.Source("allreduce_ring")
	p, _, ds := compiler.CompileSource("allreduce_ring", src, map[string]int64{"ranks": 2}, compiler.Options{})
	if ds.HasErrors() {
		t.Fatal(ds.String())
	}
	errs := commtest.Join(t, []string{"a", "a"}, cpudev.Device{}, 5*time.Second, func(ctx context.Context, c *comm.Comm) error {
		e, err := host.Open(ctx, c, p, host.Options{Timeout: 10 * time.Second})
		if err != nil {
			return err
		}
		defer e.Close()
		b, err := e.Alloc(ctx, 4096)
		if err != nil {
			return err
		}
		defer b.Free()
		if c.Rank() == 1 {
			return leave(c)
		}
		start := time.Now()
		err = e.Run(ctx, b, cpu.F32, ir.ReduceSum)
		took := time.Since(start)
		if err := check(err); err != nil {
			return err
		}
		if took > time.Second {
			return fmt.Errorf("rank 1's departure took %v to end the run (watchdog 10 s)", took)
		}
		t.Logf("rank 0: %v after %v", err, took.Round(time.Millisecond))
		return nil
	})
	commtest.Check(t, errs)
}

// At the end of a job the ranks close one after another: a rank that
// closes within the grace after a peer left gets no error.
func TestPeersCloseTogether(t *testing.T) {
	errs := commtest.Join(t, []string{"a", "a", "a"}, cpudev.Device{}, 5*time.Second, func(ctx context.Context, c *comm.Comm) error {
		if err := c.Bootstrap().Barrier(ctx); err != nil {
			return err
		}
		time.Sleep(time.Duration(c.Rank()) * 100 * time.Millisecond)
		return c.Err()
	})
	commtest.Check(t, errs)
}

// A rank that gives up on its own calls Fail before it leaves: the
// others fail at once naming it and quoting its reason, without waiting
// for the closed-peer grace or the watchdog.
func TestFailedPeerReason(t *testing.T) {
	const why = "the plan needs a switch channel this device does not have"
	rank1Leaves(t, func(c *comm.Comm) error {
		c.Fail(errors.New(why))
		if err := c.Err(); err == nil || err.Error() != why {
			return fmt.Errorf("Err after Fail: %v, want %q", err, why)
		}
		return nil
	}, func(err error) error {
		var pe *bootstrap.PeerError
		switch {
		case !errors.As(err, &pe) || pe.Rank != 1:
			return fmt.Errorf("run: %v, want rank 1 named", err)
		case !strings.Contains(err.Error(), "rank 1 has closed its bootstrap: it failed and left the job: "+why):
			return fmt.Errorf("run: %v, want rank 1's reason quoted", err)
		}
		return nil
	})
}
