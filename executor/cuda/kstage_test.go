package cudaexec

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

// stagePlans are every library algorithm at 4 ranks and the peer plans,
// by name.
func stagePlans(t *testing.T) map[string]*ir.Plan {
	t.Helper()
	plans := map[string]*ir.Plan{}
	for _, name := range algorithms.Names() {
		defs := map[string]int64{"ranks": 4}
		if strings.Contains(name, "hierarchical") {
			defs = map[string]int64{"ranks": 4, "nodes": 2, "gpus_per_node": 2}
		}
		p, err := compileWith(filepath.Join("../../algorithms", name+".msccl"), defs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plans[name] = p
	}
	files, _ := filepath.Glob("../../testdata/peer-plans/*.json")
	for _, f := range files {
		plans["peer/"+strings.TrimSuffix(filepath.Base(f), ".json")] = loadPlan(t, f)
	}
	return plans
}

// TestStageInputDecision holds which plans' inputs the kernel's
// prologue may stage (InputInKernel) for every library algorithm at 4
// ranks and every peer plan: the ones whose peers read a rank's input
// directly (rre, get, switch reductions over inputs) must keep the copy
// engine's copy ahead of the launch; the rest stage in the kernel on
// every rank. A plan missing from copyInput stages in the kernel.
func TestStageInputDecision(t *testing.T) {
	copyInput := map[string]string{
		"allreduce_allpairs":        "remote_buffers",
		"allreduce_hierarchical":    "remote_buffers",
		"allreduce_ring":            "remote_buffers",
		"allreduce_twoshot":         "remote_buffers",
		"peer/allreduce":            "remote_buffers",
		"peer/reduce":               "remote_buffers",
		"peer/reduce_tbg":           "remote_buffers",
		"peer/reduce_nvls":          "switch channel",
		"peer/reduce_nvls_pipeline": "switch channel",
	}
	plans := stagePlans(t)
	for name := range copyInput {
		if plans[name] == nil {
			t.Errorf("%s: no such plan", name)
		}
	}
	kernel := 0
	for name, p := range plans {
		for r := range p.GPUs {
			ok, why := InputInKernel(p, r)
			want, isCopy := copyInput[name]
			switch {
			case ok && isCopy:
				t.Errorf("%s rank %d: input staged in the kernel, but peers reach it (%s)", name, r, want)
			case !ok && !isCopy:
				t.Errorf("%s rank %d: input staged by copies: %s", name, r, why)
			case !ok && (!strings.Contains(why, want) || !strings.Contains(why, fmt.Sprintf("rank %d's", r))):
				t.Errorf("%s rank %d: reason %q does not name %s and the rank", name, r, why, want)
			case ok:
				kernel++
			}
		}
	}
	if kernel == 0 {
		t.Error("no plan stages its input in the kernel")
	}
}

// TestStageInputRules changes one plan that stages in the kernel
// (allgather_ring: peers only write into outputs) in each way that must
// send its input back to the copy engine.
func TestStageInputRules(t *testing.T) {
	base := stagePlans(t)["allgather_ring"]
	if ok, why := InputInKernel(base, 0); !ok {
		t.Fatalf("allgather_ring: %s", why)
	}
	for _, tc := range []struct {
		name   string
		edit   func(p *ir.Plan)
		kernel bool
	}{
		{"peer reads rank 0's input", func(p *ir.Plan) {
			p.GPUs[1].RemoteBuffers = append(p.GPUs[1].RemoteBuffers, ir.RemoteBuffer{Rank: 0, Type: ir.BufInput})
		}, false},
		{"peer writes rank 0's output", func(p *ir.Plan) {
			p.GPUs[1].RemoteBuffers = append(p.GPUs[1].RemoteBuffers, ir.RemoteBuffer{Rank: 0, Type: ir.BufOutput})
		}, true},
		{"in place, peer writes rank 0's output", func(p *ir.Plan) {
			p.InPlace = true
			p.GPUs[1].RemoteBuffers = append(p.GPUs[1].RemoteBuffers, ir.RemoteBuffer{Rank: 0, Type: ir.BufOutput})
		}, false},
		{"rank 0 names its own input", func(p *ir.Plan) {
			p.GPUs[0].RemoteBuffers = append(p.GPUs[0].RemoteBuffers, ir.RemoteBuffer{Rank: 0, Type: ir.BufInput})
		}, true},
		{"peer reads rank 1's input", func(p *ir.Plan) {
			p.GPUs[2].RemoteBuffers = append(p.GPUs[2].RemoteBuffers, ir.RemoteBuffer{Rank: 1, Type: ir.BufInput})
		}, true},
		{"switch channel over inputs", func(p *ir.Plan) {
			p.GPUs[2].Channels = append(p.GPUs[2].Channels, ir.Channel{Type: ir.ChanSwitch, BufferType: ir.BufInput,
				RankGroups: []ir.RankGroup{{Size: 4, Ranks: []int{0, 1, 2, 3}}}})
		}, false},
		{"switch channel over scratch", func(p *ir.Plan) {
			p.GPUs[2].Channels = append(p.GPUs[2].Channels, ir.Channel{Type: ir.ChanSwitch, BufferType: ir.BufScratch,
				RankGroups: []ir.RankGroup{{Size: 4, Ranks: []int{0, 1, 2, 3}}}})
		}, true},
	} {
		data, err := ir.Encode(base)
		if err != nil {
			t.Fatal(err)
		}
		p, ds := ir.Decode(data)
		if ds.HasErrors() {
			t.Fatal(ds.String())
		}
		tc.edit(p)
		if ok, why := InputInKernel(p, 0); ok != tc.kernel {
			t.Errorf("%s: in the kernel %v (%s), want %v", tc.name, ok, why, tc.kernel)
		}
	}
}

// TestSplitStaging: the kernel takes up to kernels.StageSpans spans each
// way, the input's only when allowed; more go to the copy engine whole,
// and empty spans to neither.
func TestSplitStaging(t *testing.T) {
	spans := func(n int) []Span {
		s := make([]Span, n)
		for i := range s {
			s[i] = Span{Dst: uint64(1000 * i), Src: uint64(5000 + 1000*i), N: 64}
		}
		return s
	}
	for _, tc := range []struct {
		name                  string
		ins, outs             []Span
		inOK, outOK           bool
		kin, kout, pre, after int
	}{
		{"one each way", spans(1), spans(1), true, true, 1, 1, 0, 0},
		{"input reached by peers", spans(1), spans(1), false, true, 0, 1, 1, 0},
		{"copy mode", spans(1), spans(1), false, false, 0, 0, 1, 1},
		{"eight each way", spans(kernels.StageSpans), spans(kernels.StageSpans), true, true, 8, 8, 0, 0},
		{"nine in, four out", spans(kernels.StageSpans + 1), spans(4), true, true, 0, 4, 9, 0},
		{"four in, nine out", spans(4), spans(kernels.StageSpans + 1), true, true, 4, 0, 0, 9},
		{"empty spans dropped", append(spans(1), Span{N: 0}), []Span{{N: 0}}, true, true, 1, 0, 0, 0},
		{"nothing", nil, nil, true, true, 0, 0, 0, 0},
	} {
		k, pre, after := SplitStaging(tc.ins, tc.outs, tc.inOK, tc.outOK)
		if len(k.In) != tc.kin || len(k.Out) != tc.kout || len(pre) != tc.pre || len(after) != tc.after {
			t.Errorf("%s: kernel %d in %d out, copies %d before %d after; want %d %d %d %d", tc.name,
				len(k.In), len(k.Out), len(pre), len(after), tc.kin, tc.kout, tc.pre, tc.after)
		}
		for i, x := range k.In {
			if x != tc.ins[i] {
				t.Errorf("%s: kernel input span %d is %+v, want %+v", tc.name, i, x, tc.ins[i])
			}
		}
	}
}

// TestStageLayout: the Stage parameter the launch passes is the struct
// the kernel declares (abi_check.cuh asserts the offsets; this is the
// size a launch copies), and the staging grid barrier has its own word.
func TestStageLayout(t *testing.T) {
	if kernels.StageBytes != 16+2*kernels.StageSpans*24 {
		t.Errorf("kernels.Stage is %d bytes", kernels.StageBytes)
	}
	if kernels.StageBarrier < maxBarriers {
		t.Errorf("StageBarrier %d is a plan barrier id (below %d)", kernels.StageBarrier, maxBarriers)
	}
	h := (&HangError{Stuck: []kernels.WatchRecord{{Kind: kernels.WatchBarrier, Channel: kernels.StageBarrier, Seen: 3, Expected: 4}}}).Error()
	if !strings.Contains(h, "staging grid barrier") {
		t.Errorf("a hang in the staging barrier reads %q", h)
	}
}
