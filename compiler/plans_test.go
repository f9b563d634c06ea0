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
		// 8 ranks: selection.yaml's tuned allreduce rows.
		{map[string]int64{"ranks": 8}, []string{"allreduce_allpairs_packet_0_1KiB", "allreduce_allpairs_packet_64KiB_1MiB", "allreduce_allpairs_16MiB_inf", "allgather_packet_0_128KiB", "alltoall_direct_0_inf"}},
		{map[string]int64{"ranks": 6}, []string{"allreduce_allpairs_packet_0_256KiB", "allreduce_twoshot_1MiB_inf"}},
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
	} {
		_, err := Plans(write(c.yaml), map[string]int64{"ranks": 4})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
	if _, err := Plans("../algorithms/selection.yaml", nil); err == nil {
		t.Error("missing ranks accepted")
	}
}
