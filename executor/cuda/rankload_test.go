package cudaexec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// inStep, the step in which OpenRank's ranks load kernels and upload op
// tables (rankload.go): no rank's work starts before every rank has
// reached the step (so every earlier launch is enqueued and a draining
// driver call cannot wait on a kernel that spins for a rank held up
// behind it), and no rank returns, to launch, before every rank's work
// has ended. Arrivals and work are staggered in opposite orders, so that
// without either half the first rank would go early.
func TestInStepOrders(t *testing.T) {
	const n = 4
	var arrived, done atomic.Int32
	errs := joinCPU(t, []string{"n0", "n0", "n0", "n0"}, func(ctx context.Context, c *comm.Comm) error {
		r := c.Rank()
		time.Sleep(time.Duration(r) * 40 * time.Millisecond)
		arrived.Add(1)
		err := inStep(c, r, "the test's work", func() error {
			if a := arrived.Load(); a != n {
				return fmt.Errorf("work began with %d of %d ranks in the step", a, n)
			}
			time.Sleep(time.Duration(n-1-r) * 40 * time.Millisecond)
			done.Add(1)
			return nil
		})
		if err != nil {
			return err
		}
		if d := done.Load(); d != n {
			return fmt.Errorf("left the step with %d of %d ranks' work done", d, n)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A rank whose work fails returns its own error; the others do not
// launch, and their errors name it; nobody waits for a timeout.
func TestInStepFailure(t *testing.T) {
	start := time.Now()
	errNoKernel := errors.New("no kernel image for this device")
	errs := joinCPU(t, []string{"n0", "n0", "n0", "n0"}, func(ctx context.Context, c *comm.Comm) error {
		return inStep(c, c.Rank(), "loading its kernel", func() error {
			if c.Rank() == 2 {
				return errNoKernel
			}
			return nil
		})
	})
	for r, err := range errs {
		switch {
		case err == nil:
			t.Errorf("rank %d: no error", r)
		case r == 2 && !errors.Is(err, errNoKernel):
			t.Errorf("rank 2: %v, want its own error", err)
		case r != 2 && !strings.Contains(err.Error(), "not launching: rank 2 failed loading its kernel"):
			t.Errorf("rank %d: %v, want rank 2 named", r, err)
		}
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v: a rank waited for a timeout (joinCPU's is 5 s)", d)
	}
}

// A hang of a launch nobody waited for (the last Enqueue, or Start
// without Wait) is reported once, by Free or Close, from the watchdog's
// records; a clean run's records report nothing.
func TestUnreportedHang(t *testing.T) {
	errs := joinCPU(t, []string{"n0"}, func(ctx context.Context, c *comm.Comm) error {
		watch := &cuda.HostMem{Bytes: make([]byte, 2*kernels.WatchBytes)}
		e := &RankExecutor{c: c, rs: &rankRes{nblocks: 2, watch: watch}}
		if err := e.unreported(); err != nil {
			return fmt.Errorf("clean records: %v", err)
		}
		// Block 1 gave up waiting for a packet (struct WatchRecord).
		w := watch.Bytes[kernels.WatchBytes:]
		binary.LittleEndian.PutUint32(w[0:], uint32(kernels.WatchPacket))
		binary.LittleEndian.PutUint32(w[8:], 1)
		binary.LittleEndian.PutUint32(w[24:], ^uint32(0))
		binary.LittleEndian.PutUint64(w[32:], 7)
		err := e.unreported()
		if err == nil || !strings.Contains(err.Error(), "rank 0 block 1 op 0: packet wait: expected flag 7, saw 0") {
			return fmt.Errorf("a stuck block: %v", err)
		}
		if err := e.unreported(); err != nil {
			return fmt.Errorf("reported twice: %v", err)
		}
		if e.broken == nil {
			return errors.New("the executor is not marked unusable")
		}
		return nil
	})
	if errs[0] != nil {
		t.Error(errs[0])
	}
}
