package cudaexec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// The property the in-process ranks' launch order rests on
// (rankrounds.go): no rank returns from its launch k (and so queues
// nothing after it) before every rank has submitted its launch k, however
// the ranks race. Submissions and returns go into one log; every return
// of round k must follow every submission of round k.
func TestLaunchRoundsOrder(t *testing.T) {
	const ranks, launches = 4, 30
	lr := newLaunchRounds(nil, []int{0, 1, 2, 3})
	var mu sync.Mutex
	type entry struct {
		submit  bool
		rank, k int
	}
	var log []entry
	add := func(e entry) {
		mu.Lock()
		log = append(log, e)
		mu.Unlock()
	}
	errs := joinCPU(t, []string{"n", "n", "n", "n"}, func(ctx context.Context, c *comm.Comm) error {
		for k := range launches {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
			add(entry{true, c.Rank(), k})
			if err := lr.round(c.Rank(), true, c); err != nil {
				return err
			}
			add(entry{false, c.Rank(), k})
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	submitted := make([]int, launches)
	for i, e := range log {
		if e.submit {
			submitted[e.k]++
			continue
		}
		if submitted[e.k] != ranks {
			t.Fatalf("log entry %d: rank %d returned from launch %d when %d of %d ranks had submitted it", i, e.rank, e.k, submitted[e.k], ranks)
		}
	}
}

// A refused launch counts without waiting; a rank that closes is not
// waited for; a rank that never launches ends its peers' wait at the
// communicator's timeout with an error naming it.
func TestLaunchRoundsRefusedClosedMissing(t *testing.T) {
	lr := newLaunchRounds(nil, []int{0, 1, 2})
	done := make(chan error, 1)
	errs := joinCPU(t, []string{"n", "n", "n"}, func(ctx context.Context, c *comm.Comm) error {
		switch c.Rank() {
		case 0:
			start := time.Now()
			if err := lr.round(0, false, c); err != nil || time.Since(start) > time.Second {
				return fmt.Errorf("refused launch: %v after %v", err, time.Since(start))
			}
			// Launch 2 waits for ranks 1 and 2: rank 1 counts, rank 2 closes.
			go func() { done <- lr.round(0, true, c) }()
			return nil
		case 1:
			if err := lr.round(1, false, c); err != nil {
				return err
			}
			return lr.round(1, false, c)
		default:
			time.Sleep(50 * time.Millisecond)
			lr.leave(2)
			return nil
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("rank 0's launch 2 after its peers counted or closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rank 0 still waits for a closed peer")
	}

	lr = newLaunchRounds(nil, []int{0, 1, 2})
	errs = commtest.Join(t, []string{"n", "n", "n"}, cpudev.Device{}, 2*time.Second, func(ctx context.Context, c *comm.Comm) error {
		if c.Rank() == 2 {
			return nil // never launches
		}
		err := lr.round(c.Rank(), true, c)
		// Rank 2 returns at once, so the communicator may report it closed
		// before the round's own timeout names it as not launched: either
		// way the error must name rank 2 as the one missing.
		if err == nil || !strings.Contains(err.Error(), "rank(s) 2 of this process") {
			return fmt.Errorf("want the missing rank 2 named, got %v", err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
