package msccl

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

func TestLoadPlan(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"testdata/peer-plans/allreduce_packet.json", true},
		{"testdata/peer-plans/missing.json", false},
		{"go.mod", false},
	} {
		p, err := LoadPlan(c.path)
		if (err == nil) != c.ok {
			t.Errorf("LoadPlan(%s): err %v, want ok=%v", c.path, err, c.ok)
		}
		if c.ok && len(p.GPUs) != 2 {
			t.Errorf("%s: %d gpus", c.path, len(p.GPUs))
		}
	}
}

func TestCompileAlgorithm(t *testing.T) {
	p, err := CompileAlgorithm("algorithms", "allreduce_allpairs_packet", map[string]int64{"ranks": 4})
	if err != nil {
		t.Skipf("library algorithm not available: %v", err)
	}
	if len(p.GPUs) != 4 {
		t.Errorf("compiled %d ranks, want 4", len(p.GPUs))
	}
	if _, err := CompileAlgorithm("algorithms", "no_such_algorithm", nil); err == nil {
		t.Error("missing algorithm compiled")
	}
}

// TestOpenWithoutGPU: on a machine without CUDA, Open must fail cleanly
// with ErrNoGPU rather than crash; with a GPU it must open and close.
func TestOpen(t *testing.T) {
	p, err := LoadPlan("testdata/peer-plans/allreduce.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(p, Options{})
	if errors.Is(err, ErrNoGPU) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.Ranks() != 2 {
		t.Errorf("Ranks() = %d", c.Ranks())
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestSelectPlan(t *testing.T) {
	cases := []struct {
		col   string
		size  int64
		want  string // algorithm name prefix of the plan
		fails bool
	}{
		// The 8-rank allreduce rows are the H200 tune's (selection.yaml);
		// below 1 KiB the built-in LL row stays.
		{"allreduce", 512, "allreduce_allpairs_packet_0_1KiB", false},
		{"allreduce", 1 << 10, "allreduce_allpairs_packet_1KiB_64KiB", false},
		{"allreduce", 512 << 10, "allreduce_allpairs_packet_64KiB_1MiB", false},
		{"allreduce", 64 << 20, "allreduce_allpairs_16MiB_inf", false},
		{"allgather", 1 << 20, "allgather_direct", false},
		{"broadcast", 1 << 20, "", true},
		{"allreduce", 0, "", true},
		// 4000 bytes is 1000 floats: chunks of 31 and 32 units, served
		// since scratch slots are uniform; 4004 is not whole 16-byte
		// units, and 64 bytes would leave chunks empty.
		{"allreduce", 4000, "allreduce_allpairs_packet_1KiB_64KiB", false},
		{"allreduce", 4004, "size rule: multiples of 16 bytes from 1024 bytes", true},
		{"allreduce", 64, "no allreduce plan for 8 ranks covers 64 bytes", true},
	}
	for _, c := range cases {
		p, err := SelectPlan("algorithms/selection.yaml", c.col, 8, c.size)
		if c.fails {
			if err == nil {
				t.Errorf("%s %d: selected %s, want an error", c.col, c.size, p.Name)
			} else if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %d: %v, want an error containing %q", c.col, c.size, err, c.want)
			} else if c.col == "allreduce" && ir.ErrorCode(err) != ir.CodeSizeRefused {
				t.Errorf("%s %d: code %q, want %s: a size no row serves", c.col, c.size, ir.ErrorCode(err), ir.CodeSizeRefused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %d: %v", c.col, c.size, err)
			continue
		}
		if len(p.Name) < len(c.want) || p.Name[:len(c.want)] != c.want {
			t.Errorf("%s %d: selected %s, want %s...", c.col, c.size, p.Name, c.want)
		}
	}
}

// The embedded library works from any directory ("" selects it).
func TestSelectPlanEmbedded(t *testing.T) {
	wd, _ := os.Getwd()
	if err := os.Chdir("/"); err != nil {
		t.Skip(err)
	}
	defer os.Chdir(wd)
	p, err := SelectPlan("", "allreduce", 8, 1<<20)
	if err != nil {
		t.Fatalf("SelectPlan from /: %v", err)
	}
	if !strings.HasPrefix(p.Name, "allreduce_allpairs_1MiB") {
		t.Fatalf("SelectPlan from / chose %s, want allreduce_allpairs_1MiB...", p.Name)
	}
	if _, err := CompileAlgorithm("", "allgather_ring", map[string]int64{"ranks": 4}); err != nil {
		t.Fatalf("CompileAlgorithm from /: %v", err)
	}
}

// The table is keyed on (world size, ranks per node): one node gets the
// single-node rows, exactly as SelectPlan; several nodes get only the
// rows for several nodes (the hierarchical algorithms), compiled for that
// split.
func TestSelectPlanNodes(t *testing.T) {
	one, err := SelectPlanNodes("", "allreduce", 8, 8, 1<<20)
	if err != nil || !strings.HasPrefix(one.Name, "allreduce_allpairs_1MiB") {
		t.Fatalf("one node of 8: %v, %v", one, err)
	}
	for _, c := range []struct {
		col        string
		ranks, per int
		size       int64
		want       string // plan name prefix, or the error
		fails      bool
	}{
		{"allreduce", 8, 4, 1 << 20, "allreduce_hierarchical", false},
		{"allreduce", 16, 8, 64 << 10, "allreduce_hierarchical", false},
		{"allgather", 8, 2, 1 << 20, "allgather_hierarchical", false},
		{"reducescatter", 8, 4, 1 << 20, "no reducescatter plan for 8 ranks (2 nodes of 4) covers 1048576 bytes", true},
		{"allreduce", 64, 8, 1 << 20, "no row matches 64 ranks with 8 per node", true},
		{"allreduce", 8, 3, 1 << 20, "8 ranks at 3 per node: want 1 <= ranks per node <= ranks, dividing ranks", true},
		{"allreduce", 8, 16, 1 << 20, "8 ranks at 16 per node", true},
		{"allreduce", 8, 0, 1 << 20, "8 ranks at 0 per node", true},
	} {
		p, err := SelectPlanNodes("", c.col, c.ranks, c.per, c.size)
		if c.fails {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %d/%d: %v, want an error containing %q", c.col, c.ranks, c.per, err, c.want)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(p.Name, c.want) {
			t.Errorf("%s %d/%d: %v, %v; want %s", c.col, c.ranks, c.per, p, err, c.want)
			continue
		}
		if len(p.GPUs) != c.ranks {
			t.Errorf("%s %d/%d: plan has %d ranks", c.col, c.ranks, c.per, len(p.GPUs))
		}
		// Compiled for this split: the channels between ranks of different
		// nodes are port channels only.
		for r, g := range p.GPUs {
			for _, ch := range g.Channels {
				for _, peer := range ch.ConnectedTo {
					if peer/c.per != r/c.per && ch.Type != ir.ChanPort {
						t.Fatalf("%s %d/%d: rank %d has a %s channel to rank %d on another node", c.col, c.ranks, c.per, r, ch.Type, peer)
					}
				}
			}
		}
	}
}
