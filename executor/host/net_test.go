package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// TestAcrossNodes declares the ranks on two nodes: the hierarchical
// algorithms' port channels then cross the boundary through the socket
// transport (puts, signals, flushes over TCP), and the upstream 2×4 LL
// reduce-scatter's port packets too; every launch is checked against the
// CPU executor.
func TestAcrossNodes(t *testing.T) {
	for _, c := range []struct {
		algo, fixture string
		n, perNode    int
		dt            cpu.DType
		red           ir.ReduceOp
	}{
		{algo: "allreduce_hierarchical", n: 4, perNode: 2, dt: cpu.F32, red: ir.ReduceSum},
		{algo: "allgather_hierarchical", n: 4, perNode: 2, dt: cpu.I32, red: ir.ReduceSum},
		{algo: "allreduce_hierarchical", n: 6, perNode: 3, dt: cpu.BF16, red: ir.ReduceMax},
		{fixture: "reducescatter_pkt_2x4.json", n: 8, perNode: 4, dt: cpu.F16, red: ir.ReduceSum},
	} {
		name := c.algo + c.fixture
		t.Run(fmt.Sprintf("%s/%dx%d", name, c.n/c.perNode, c.perNode), func(t *testing.T) {
			var p *ir.Plan
			if c.fixture != "" {
				p = loadPlan(t, "../../testdata/peer-plans/"+c.fixture)
			} else {
				src, err := algorithms.Source(c.algo)
				if err != nil {
					t.Fatal(err)
				}
				var ds compiler.Diagnostics
				p, _, ds = compiler.CompileSource(c.algo, src, map[string]int64{"nodes": int64(c.n / c.perNode), "gpus_per_node": int64(c.perNode)}, compiler.Options{})
				if ds.HasErrors() {
					t.Fatal(ds.String())
				}
			}
			runCheckedOn(t, p, admittedSize(t, p, 40000), c.dt, c.red, 3, func(r int) string { return fmt.Sprintf("node%d", r/c.perNode) })
		})
	}
}

// TestMemoryChannelAcrossNodes: a plan whose memory channels cross the
// declared boundary is refused at Open, naming the channel and the nodes,
// on every rank, not run.
func TestMemoryChannelAcrossNodes(t *testing.T) {
	p := compile(t, "allreduce_allpairs", 2)
	errs := ranksOn(t, 2, 5*time.Second, func(r int) string { return fmt.Sprintf("node%d", r) }, func(ctx context.Context, c *comm.Comm) error {
		ex, err := Open(ctx, c, p, Options{Timeout: time.Second})
		if err == nil {
			ex.Close()
		}
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "memory channels connect ranks of one node only") {
			t.Errorf("rank %d: got %v", r, err)
		}
	}
}
