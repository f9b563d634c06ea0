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
	"github.com/msccl-go/msccl-go/executor/wiring"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// wiringOf is p's wiring as the executors derive it.
func wiringOf(t *testing.T, p *ir.Plan) *comm.Wiring {
	t.Helper()
	w, err := wiring.Of(p)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// join runs f as len(nodes) ranks on the cpu device, rank r on node
// nodes[r].
func join(t *testing.T, nodes []string, f func(ctx context.Context, c *comm.Comm) error) []error {
	t.Helper()
	return commtest.Join(t, nodes, cpudev.Device{}, 5*time.Second, f)
}

// Exchange maps every node-local rank's memory and nothing of the other
// node's; the channels pair as the plan says.
func TestExchangeAndConnect(t *testing.T) {
	nodes := []string{"a", "a", "b", "a"}
	commtest.Check(t, join(t, nodes, func(ctx context.Context, c *comm.Comm) error {
		m, err := c.Device().Alloc(4096)
		if err != nil {
			return err
		}
		m.(*cpudev.Memory).Bytes()[0] = byte(10 + c.Rank())
		all, err := c.Exchange(ctx, m)
		if err != nil {
			return err
		}
		defer func() {
			for _, x := range all {
				if x != nil {
					x.Close()
				}
			}
		}()
		for r, x := range all {
			if (x == nil) != (nodes[r] != nodes[c.Rank()]) {
				t.Errorf("rank %d: rank %d mapped: %v", c.Rank(), r, x != nil)
				continue
			}
			if x != nil && x.(*cpudev.Memory).Bytes()[0] != byte(10+r) {
				t.Errorf("rank %d sees %d in rank %d's memory", c.Rank(), x.(*cpudev.Memory).Bytes()[0], r)
			}
		}
		return nil
	}))
}

// A plan whose channels cross nodes is refused on the CPU device, naming
// the peer and its node; a plan of another size is refused too.
func TestConnectRefusals(t *testing.T) {
	src, _ := algorithms.Source("allreduce_ring")
	p, _, ds := compiler.CompileSource("allreduce_ring", src, map[string]int64{"ranks": 2}, compiler.Options{})
	if ds.HasErrors() {
		t.Fatal(ds.String())
	}
	p3, _, _ := compiler.CompileSource("allreduce_ring", src, map[string]int64{"ranks": 3}, compiler.Options{})
	w, w3 := wiringOf(t, p), wiringOf(t, p3)
	errs := join(t, []string{"a", "b"}, func(ctx context.Context, c *comm.Comm) error {
		if _, err := c.Connect(ctx, w3); err == nil || !strings.Contains(err.Error(), "has 3 ranks, the job has 2") {
			t.Errorf("rank %d: 3-rank plan: %v", c.Rank(), err)
		}
		_, err := c.Connect(ctx, w)
		return err
	})
	for r, err := range errs {
		peer, node := 1-r, []string{"a", "b"}[1-r]
		if err == nil || !strings.Contains(err.Error(), "to rank "+string(rune('0'+peer))+", which is on node \""+node+"\"") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// Ranks that open different plans are told so, each naming the others,
// instead of signalling words nobody waits on.
func TestConnectDifferentPlans(t *testing.T) {
	var ws []*comm.Wiring
	for _, name := range []string{"allreduce_ring", "allgather_ring"} {
		src, _ := algorithms.Source(name)
		p, _, ds := compiler.CompileSource(name, src, map[string]int64{"ranks": 2}, compiler.Options{})
		if ds.HasErrors() {
			t.Fatal(ds.String())
		}
		ws = append(ws, wiringOf(t, p))
	}
	errs := join(t, []string{"a", "a"}, func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Connect(ctx, ws[c.Rank()])
		return err
	})
	for r, err := range errs {
		want := fmt.Sprintf("rank %d: ranks [%d] connect a different plan than this rank's", r, 1-r)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v, want %q", r, err, want)
		}
	}
}

// A job the bootstrap's root declares failed (here: rank 2 never reaches
// a barrier, so the others' barrier times out naming it) reaches Err and
// Dead on the ranks that waited, with the same error.
func TestBootstrapVerdictReachesComm(t *testing.T) {
	commtest.Check(t, join(t, []string{"a", "a", "a"}, func(ctx context.Context, c *comm.Comm) error {
		if c.Rank() == 2 {
			select { // the verdict reaches the rank at fault too
			case <-c.Dead():
				return nil
			case <-time.After(5 * time.Second):
				return fmt.Errorf("Dead not closed on the rank at fault")
			}
		}
		bctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		berr := c.Bootstrap().Barrier(bctx)
		var te *bootstrap.TimeoutError
		if !errors.As(berr, &te) || len(te.Ranks) != 1 || te.Ranks[0] != 2 {
			return fmt.Errorf("barrier: %v, want a timeout naming rank 2", berr)
		}
		select {
		case <-c.Dead():
		case <-time.After(5 * time.Second):
			return fmt.Errorf("Dead not closed after the bootstrap failed: %v", berr)
		}
		if err := c.Err(); err != berr {
			return fmt.Errorf("Err() = %v, want the bootstrap's verdict %v", err, berr)
		}
		return nil
	}))
}
