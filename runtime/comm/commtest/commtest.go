// Package commtest runs the ranks of a job as goroutines of one test,
// over the real bootstrap on loopback, for tests of the communicator and
// of what is built on it. It holds test helpers only.
package commtest

import (
	"context"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// Join runs f as len(nodes) ranks, rank r on node nodes[r], each with a
// communicator on dev whose steps time out after timeout (f's context
// after four times that), and returns every rank's error: f's, else
// closing the communicator's.
func Join(t testing.TB, nodes []string, dev comm.Device, timeout time.Duration, f func(ctx context.Context, c *comm.Comm) error) []error {
	t.Helper()
	id, err := bootstrap.NewUniqueID("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	n := len(nodes)
	return par.Each(n, func(r int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 4*timeout)
		defer cancel()
		bs, err := bootstrap.Connect(ctx, bootstrap.Config{Rank: r, World: n, LocalRank: -1, LocalWorld: -1, Node: nodes[r], ID: id, Timeout: timeout})
		if err != nil {
			return err
		}
		c, err := comm.New(ctx, bs, dev, comm.Options{Timeout: timeout})
		if err != nil {
			bs.Close()
			return err
		}
		err = f(ctx, c)
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
		return err
	})
}

// Check fails t with every rank's error of errs (what Join returns),
// each named by its rank, for the runs in which every rank must succeed.
func Check(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
