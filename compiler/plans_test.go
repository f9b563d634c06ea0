package compiler

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
)

func TestPlansSelection(t *testing.T) {
	for _, c := range []struct {
		defines map[string]int64
		want    []string
	}{
		{map[string]int64{"ranks": 8}, []string{"allreduce_allpairs_packet_0_256KiB", "allreduce_twoshot_1MiB_inf", "allgather_packet_0_128KiB", "alltoall_direct_0_inf"}},
		{map[string]int64{"ranks": 8, "nodes": 2, "gpus_per_node": 4}, []string{"allreduce_hierarchical_0_inf", "allgather_hierarchical_0_inf"}},
		{map[string]int64{"ranks": 32}, []string{"allreduce_ring_0_inf", "allgather_ring_0_inf", "reducescatter_ring_0_inf"}},
	} {
		plans, err := Plans("../algorithms/selection.yaml", c.defines)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range plans {
			names = append(names, p.Name)
			if p.Plan.MinMessageSize >= p.Plan.MaxMessageSize {
				t.Errorf("%s: empty size range", p.Name)
			}
			if int64(len(p.Plan.GPUs)) != c.defines["ranks"] {
				t.Errorf("%s: %d gpus", p.Name, len(p.Plan.GPUs))
			}
		}
		all := strings.Join(names, " ")
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%v: no plan %s in %s", c.defines, w, all)
			}
		}
	}
	plans, err := Plans("../algorithms/selection.yaml", map[string]int64{"ranks": 4})
	if err != nil {
		t.Fatal(err)
	}
	// The selected plans are the verified library ones.
	for _, p := range plans[:2] {
		if ds := Verify(p.Plan, p.Source, nil, []cpu.DType{cpu.F16}); len(ds) > 0 {
			t.Errorf("%s: %s", p.Name, ds)
		}
	}
	if plans[0].Plan.MaxMessageSize != 256<<10 || plans[2].Plan.MaxMessageSize != math.MaxUint64 {
		t.Errorf("message size ranges not set: %d %d", plans[0].Plan.MaxMessageSize, plans[2].Plan.MaxMessageSize)
	}
}

func TestPlansErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "sel.yaml")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ yaml, want string }{
		{"- collective: allreduce\n  algoritm: x.msccl\n", `unknown key "algoritm"`},
		{"- collective: allreduce\n  algorithm: nope.msccl\n", "nope.msccl"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  max_message_size: 1XB\n", `invalid size "1XB"`},
		{"collective: allreduce\n", "list of rows"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  multi_node: true\n", "sel.yaml:1: a multi-node row must bound nodes and ranks_per_node"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  nodes: [2, 4]\n", "sel.yaml:1: a multi-node row must bound nodes and ranks_per_node"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  nodes: [1, 4]\n  ranks_per_node: [2, 8]\n", "nodes [1 4] mixes one node and several: split the row"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  multi_node: true\n  nodes: [1, 1]\n  ranks_per_node: [2, 8]\n", "nodes [1 1]: a multi-node row is for 2 nodes or more"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  nodes: [0, 1]\n", "nodes [0 1]: a world has at least one node"},
		{"- collective: allreduce\n  algorithm: x.msccl\n  ranks_per_node: [0, 8]\n", "ranks_per_node [0 8]: a node has at least one rank"},
	} {
		_, err := Plans(write(c.yaml), map[string]int64{"ranks": 4})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
	if _, err := Plans("../algorithms/selection.yaml", nil); err == nil {
		t.Error("missing ranks accepted")
	}
	// A world that does not split into equal nodes.
	for _, c := range []struct {
		defines map[string]int64
		want    string
	}{
		{map[string]int64{"ranks": 8, "gpus_per_node": 3}, "-D gpus_per_node=3 does not divide -D ranks=8 into whole nodes"},
		{map[string]int64{"ranks": 8, "gpus_per_node": 0}, "-D gpus_per_node=0 does not divide"},
		{map[string]int64{"ranks": 8, "nodes": 3}, "-D nodes=3 does not divide -D ranks=8 into equal nodes"},
		{map[string]int64{"ranks": 8, "nodes": 2, "gpus_per_node": 2}, "-D nodes=2 times -D gpus_per_node=2 is not -D ranks=8"},
		{map[string]int64{"ranks": 0}, "-D ranks=0: a world has at least one rank"},
		{map[string]int64{"ranks": 32, "nodes": 2}, "no row matches 32 ranks with 16 per node"},
	} {
		_, err := Plans("../algorithms/selection.yaml", c.defines)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.defines, err, c.want)
		}
	}
}
