package cudaexec

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

func mustCompile(t *testing.T, name string, defs map[string]int64) *ir.Plan {
	t.Helper()
	p, err := compileWith("../../algorithms/"+name+".msccl", defs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func joinCPU(t *testing.T, nodes []string, f func(ctx context.Context, c *comm.Comm) error) []error {
	t.Helper()
	return commtest.Join(t, nodes, cpudev.Device{}, 5*time.Second, f)
}

// OpenRank needs the cuda device, and every rank refuses, alike and
// before anything collective, a plan whose memory channels cross nodes;
// port channels across nodes pass (the socket transport, netproxy.go).
func TestOpenRankRefuses(t *testing.T) {
	ring := mustCompile(t, "allreduce_twoshot", map[string]int64{"ranks": 2})
	errs := joinCPU(t, []string{"a", "a"}, func(ctx context.Context, c *comm.Comm) error {
		_, err := OpenRank(ctx, c, ring, Options{})
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), `the communicator's device is "cpu"; OpenRank needs the cuda device`) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	hier := mustCompile(t, "allreduce_hierarchical", map[string]int64{"ranks": 4, "nodes": 2, "gpus_per_node": 2})
	twoshot := mustCompile(t, "allreduce_twoshot", map[string]int64{"ranks": 4})
	errs = joinCPU(t, []string{"n0", "n0", "n1", "n1"}, func(ctx context.Context, c *comm.Comm) error {
		if err := rankPlanCheck(hier, c, Options{}); err != nil {
			t.Errorf("rank %d: port channels across nodes refused: %v", c.Rank(), err)
		}
		return rankPlanCheck(twoshot, c, Options{})
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "memory channels connect ranks of one node only") || ir.ErrorCode(err) != ir.CodeUnsupported {
			t.Errorf("rank %d: %v (code %q)", r, err, ir.ErrorCode(err))
		}
	}
	errs = joinCPU(t, []string{"n0", "n0", "n0", "n0"}, func(ctx context.Context, c *comm.Comm) error {
		if err := rankPlanCheck(hier, c, Options{}); err != nil {
			return err
		}
		if err := rankPlanCheck(hier, c, Options{PortCopy: PortCopyProxy}); err == nil || !strings.Contains(err.Error(), "PortCopyProxy needs every rank in one process") || ir.ErrorCode(err) != ir.CodeBadOptions {
			t.Errorf("rank %d: PortCopyProxy: %v (code %q)", c.Rank(), err, ir.ErrorCode(err))
		}
		if err := rankPlanCheck(hier, c, Options{Trace: 8}); ir.ErrorCode(err) != ir.CodeBadOptions {
			t.Errorf("rank %d: Trace: %v", c.Rank(), err)
		}
		if err := rankPlanCheck(ring, c, Options{}); ir.ErrorCode(err) != ir.CodeRanks {
			t.Errorf("rank %d: a 2-rank plan in a 4-rank job: %v", c.Rank(), err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d, one node: %v", r, err)
		}
	}
}
