package cudaexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/runtime/comm"
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
