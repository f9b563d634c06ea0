package host

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// compile builds a library algorithm for n ranks.
func compile(t testing.TB, name string, n int) *ir.Plan {
	t.Helper()
	src, err := algorithms.Source(name)
	if err != nil {
		t.Fatal(err)
	}
	p, _, ds := compiler.CompileSource("algorithms/"+name+".msccl", src, map[string]int64{"ranks": int64(n)}, compiler.Options{})
	if ds.HasErrors() {
		t.Fatalf("%s: %s", name, ds.String())
	}
	return p
}

// ranks runs f as n ranks, each a goroutine with its own bootstrap
// (the real one, on loopback) and communicator on the CPU device, and
// returns their errors by rank.
func ranks(t testing.TB, n int, timeout time.Duration, f func(ctx context.Context, c *comm.Comm) error) []error {
	t.Helper()
	return ranksOn(t, n, timeout, onNode0, f)
}

// ranksOn is ranks with rank r declared on node nodeOf(r): ranks of
// different nodes share no memory and meet through the socket transport.
func ranksOn(t testing.TB, n int, timeout time.Duration, nodeOf func(int) string, f func(ctx context.Context, c *comm.Comm) error) []error {
	t.Helper()
	nodes := make([]string, n)
	for r := range nodes {
		nodes[r] = nodeOf(r)
	}
	return commtest.Join(t, nodes, cpudev.Device{}, timeout, f)
}

// execRanks is ranksOn with every rank's executor of p open (opt) for f,
// and closed after it.
func execRanks(t testing.TB, n int, timeout time.Duration, nodeOf func(int) string, p *ir.Plan, opt Options, f func(ctx context.Context, c *comm.Comm, ex *Executor) error) []error {
	t.Helper()
	return ranksOn(t, n, timeout, nodeOf, func(ctx context.Context, c *comm.Comm) error {
		ex, err := Open(ctx, c, p, opt)
		if err != nil {
			return err
		}
		defer ex.Close()
		return f(ctx, c, ex)
	})
}

// admittedSize is the smallest message size p admits from from bytes on:
// the tests run each plan at a size its rule serves.
func admittedSize(t *testing.T, p *ir.Plan, from int64) int64 {
	t.Helper()
	rule, err := p.SizeRule()
	if err != nil {
		t.Fatal(err)
	}
	size, ok := rule.Next(from)
	if !ok {
		t.Fatalf("no admitted size from %d bytes (%s)", from, rule)
	}
	return size
}

// onNode0 puts every rank on one node.
func onNode0(int) string { return "node0" }

// runChecked runs p on n in-process ranks for the given launches and
// compares every launch's outputs with the CPU executor's.
func runChecked(t *testing.T, p *ir.Plan, size int64, dt cpu.DType, red ir.ReduceOp, launches int) {
	t.Helper()
	runCheckedOn(t, p, size, dt, red, launches, onNode0)
}

func runCheckedOn(t *testing.T, p *ir.Plan, size int64, dt cpu.DType, red ir.ReduceOp, launches int, nodeOf func(int) string) {
	t.Helper()
	n := len(p.GPUs)
	rep, err := cpu.Run(p, cpu.Options{Size: size, DType: dt, Reduce: red, Launches: launches})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("CPU executor: %s", rep.Verdict)
	}
	commtest.Check(t, execRanks(t, n, 10*time.Second, nodeOf, p, Options{Timeout: 5 * time.Second}, func(ctx context.Context, c *comm.Comm, ex *Executor) error {
		b, err := ex.Alloc(ctx, size)
		if err != nil {
			return err
		}
		defer b.Free()
		r := c.Rank()
		for l := range launches {
			copy(b.Input(), rep.Inputs[l][r])
			if err := ex.Run(ctx, b, dt, red); err != nil {
				return err
			}
			want := rep.Outputs[l][r]
			lo, hi := cpu.DefinedOutput(p, r, b.in, int64(len(want)))
			if got := b.Output(); !bytes.Equal(got[lo:hi], want[lo:hi]) {
				return fmt.Errorf("launch %d: rank %d's output differs from the CPU executor's", l, r)
			}
		}
		return nil
	}))
}

func TestLibrary(t *testing.T) {
	for _, c := range []struct {
		algo string
		n    int
		size int64
	}{
		{"allreduce_twoshot", 4, 64 << 10},
		{"allgather_ring", 4, 64 << 10},
		{"alltoall_direct", 4, 64 << 10},
		{"allreduce_allpairs_packet", 3, 48 << 10},
		{"allreduce_ring", 2, 32 << 10},
		{"reducescatter_ring", 3, 48 << 10},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.algo, c.n), func(t *testing.T) {
			p := compile(t, c.algo, c.n)
			runChecked(t, p, c.size, cpu.F32, ir.ReduceSum, 3)
		})
	}
}

// Every library algorithm at 2 and 4 ranks (3 for uneven splits), at an
// admitted size that does not split evenly, over three launches, with a
// reduction and type that a wrong schedule would show.
func TestLibraryAll(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, name := range algorithms.Names() {
		for _, n := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				src, _ := algorithms.Source(name)
				defs := map[string]int64{"ranks": int64(n)}
				if strings.HasSuffix(name, "_hierarchical") {
					// Port channels between the two halves.
					defs = map[string]int64{"nodes": 2, "gpus_per_node": int64(n / 2)}
				}
				p, _, ds := compiler.CompileSource(name, src, defs, compiler.Options{})
				if ds.HasErrors() {
					t.Skipf("does not compile at %d ranks", n)
				}
				runChecked(t, p, admittedSize(t, p, 5000), cpu.I32, ir.ReduceMax, 3)
			})
		}
	}
}

// The upstream fixtures run as upstream's executor would run them (switch
// channels included: shared memory maps every member of a group), at a
// size and launch count their README says they are correct for; the CPU
// executor's verdict decides which those are.
func TestPeerPlans(t *testing.T) {
	files, err := filepath.Glob("../../testdata/peer-plans/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p := loadPlan(t, f)
			size := admittedSize(t, p, 16<<10)
			rep, err := cpu.Run(p, cpu.Options{Size: size, DType: cpu.F32, Launches: 2})
			if err != nil || !rep.OK() {
				t.Skipf("the CPU executor does not pass it at %d bytes: %v %v", size, err, rep)
			}
			runChecked(t, p, size, cpu.F32, ir.ReduceSum, 2)
		})
	}
}
