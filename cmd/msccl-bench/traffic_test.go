package main

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cuda/reference"
	"github.com/msccl-go/msccl-go/ir"
)

func libraryPlan(t *testing.T, algo string, ranks int, defs map[string]int64) *ir.Plan {
	t.Helper()
	c := config{algo: algo, ranks: ranks, defs: defines{}}
	for k, v := range defs {
		c.defs[k] = v
	}
	p, _, err := loadPlan(&c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanTraffic holds the byte count to what each library plan moves
// by construction, for n ranks and a message of M bytes (chunk c = M/n):
//   - allgather_direct: every rank copies its input (c) into n outputs:
//     n·c = M loaded and stored a rank.
//   - allreduce_allpairs: every rank reads chunk r of the n inputs and
//     writes it to n places: M loaded and stored a rank, whatever the
//     instances.
//   - allreduce_twoshot: n−1 pieces of c pushed into peers' scratch, then
//     n sources reduced and n copies written: (2n−1)·c a rank each way,
//     with or without the split.
//   - allreduce_allpairs_packet: a respkt (c plain and n−1 packet chunks
//     in; c plain and n−1 packet chunks out), n−1 ppkts (c in, 2c out)
//     and n−1 upkts (2c in, c out): (5n−4)·c a rank each way.
func TestPlanTraffic(t *testing.T) {
	const M = 64 << 20
	for _, tc := range []struct {
		algo  string
		ranks int
		defs  map[string]int64
		each  func(n int64) int64 // bytes loaded (= stored) by all ranks
	}{
		{"allgather_direct", 2, nil, func(n int64) int64 { return n * M }},
		{"allgather_direct", 8, nil, func(n int64) int64 { return n * M }},
		{"allgather_direct", 8, map[string]int64{"instances": 4}, func(n int64) int64 { return n * M }},
		{"allreduce_allpairs", 4, nil, func(n int64) int64 { return n * M }},
		{"allreduce_allpairs", 8, map[string]int64{"instances": 16}, func(n int64) int64 { return n * M }},
		{"allreduce_twoshot", 4, nil, func(n int64) int64 { return (2*n - 1) * M }},
		{"allreduce_twoshot", 8, nil, func(n int64) int64 { return (2*n - 1) * M }},
		{"allreduce_twoshot", 8, map[string]int64{"split": 1}, func(n int64) int64 { return (2*n - 1) * M }},
		{"allreduce_allpairs_packet", 4, nil, func(n int64) int64 { return (5*n - 4) * M }},
		{"allreduce_allpairs_packet", 8, nil, func(n int64) int64 { return (5*n - 4) * M }},
	} {
		p := libraryPlan(t, tc.algo, tc.ranks, tc.defs)
		for _, ll := range []int{8, 16} {
			got, err := planTraffic(p, M, ll)
			if err != nil {
				t.Fatalf("%s@%d %v: %v", tc.algo, tc.ranks, tc.defs, err)
			}
			want := tc.each(int64(tc.ranks))
			if got.Loads != want || got.Stores != want {
				t.Errorf("%s@%d %v LL%d: loads %d, stores %d; want %d each", tc.algo, tc.ranks, tc.defs, ll, got.Loads, got.Stores, want)
			}
		}
	}
}

// TestPlanTrafficPipeline: the same ops run in pipeline windows move the
// same bytes, whether the unit divides the chunk or not.
func TestPlanTrafficPipeline(t *testing.T) {
	const M = 3 << 20
	base := libraryPlan(t, "allgather_direct", 4, nil)
	want, err := planTraffic(base, M, 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []int{1 << 10, 100000, M} {
		p := libraryPlan(t, "allgather_direct", 4, nil)
		for r := range p.GPUs {
			for b := range p.GPUs[r].ThreadBlocks {
				tb := &p.GPUs[r].ThreadBlocks[b]
				var pipe ir.Op
				pipe.Code = ir.OpPipeline
				pipe.SetIter(&ir.IterContext{UnitSize: unit, NumChunks: 1})
				pipe.SetOps(tb.Ops)
				tb.Ops = []ir.Op{pipe}
			}
		}
		got, err := planTraffic(p, M, 16)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("unit %d: %+v, want %+v (no pipeline)", unit, got, want)
		}
	}
}

func TestPlanTrafficRefuses(t *testing.T) {
	p := libraryPlan(t, "allgather_direct", 2, nil)
	if _, err := planTraffic(p, 1<<20, 4); err == nil || !strings.Contains(err.Error(), "LL packet width") {
		t.Errorf("LL4: %v", err)
	}
	var sw ir.Op
	sw.Code = ir.OpGstore
	p.GPUs[0].ThreadBlocks[0].Ops = append(p.GPUs[0].ThreadBlocks[0].Ops, sw)
	if _, err := planTraffic(p, 1<<20, 16); err == nil || !strings.Contains(err.Error(), "multicast") {
		t.Errorf("switch op: %v", err)
	}
}

// TestHBMRow: the rate is the plan's bytes over the row's time, the
// fraction that rate over the run's copy rate, and the line says both.
func TestHBMRow(t *testing.T) {
	p := libraryPlan(t, "allgather_direct", 8, nil)
	row := Row{Bytes: 64 << 20, TimeUs: 250}
	h := hbmRow(p, 16, &row, 4e12)
	if h.Skipped != "" || h.LoadBytes != 8*64<<20 || h.StoreBytes != 8*64<<20 {
		t.Fatalf("%+v", h)
	}
	want := float64(16*64<<20) / 250e-6 / 1e9
	if h.RateGBps != want || h.Fraction != want*1e9/4e12 {
		t.Errorf("rate %v, fraction %v; want %v, %v", h.RateGBps, h.Fraction, want, want*1e9/4e12)
	}
	row.HBM = h
	row.Ref = &RefRow{Name: "allgather_direct", TimeUs: 500}
	row.Ref.HBM = refHBM("allgather_direct", p, row.Bytes, 500, 4e12)
	var out strings.Builder
	printHBM(&out, &row)
	got := out.String()
	for _, want := range []string{
		"# " + strings.Repeat(" ", 11) + " hbm 1.074 GB a collective (loads 0.537, stores 0.537): 4.29 TB/s, hbm/copy 1.07\n",
		" reference hbm 1.074 GB a collective (loads 0.537, stores 0.537): 2.15 TB/s, hbm/copy 0.54\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lines %q lack %q", got, want)
		}
	}
}

// TestReferenceTraffic: each hand-written kernel's count equals its
// mirror plan's, so the two hbm lines of a row divide the same bytes.
func TestReferenceTraffic(t *testing.T) {
	const M = 64 << 20
	for _, k := range reference.Kernels {
		for _, n := range []int{2, 4, 8} {
			p := libraryPlan(t, k.Plan, n, nil)
			want, err := planTraffic(p, M, 16)
			if err != nil {
				t.Fatal(err)
			}
			in, _, _ := p.BufferBytes(M)
			l, s, ok := k.Traffic(n, in)
			if !ok || l != want.Loads || s != want.Stores {
				t.Errorf("%s at %d ranks: loads %d, stores %d (ok %v); plan %s: %d, %d", k.Name, n, l, s, ok, k.Plan, want.Loads, want.Stores)
			}
		}
	}
}

func TestHBMRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--hbm", "--tune", "--collective", "allreduce", "--ranks", "8", "--tune-out", "x.yaml"},
		{"--hbm", "--procs", "2", "--device", "cuda", "--algo", "allgather_direct"},
		{"--hbm", "--device", "cpu", "--algo", "allgather_direct"},
	} {
		var out strings.Builder
		err := run(args, &out)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "--hbm") {
			t.Errorf("%v: %v (exit %d)", args, err, exitCode(err))
		}
	}
}
