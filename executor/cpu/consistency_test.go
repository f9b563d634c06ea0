package cpu

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestConsistencyMatchesFloats holds the reduction-tree claim of
// CheckConsistency to the bits: on every library plan, upstream fixture
// and direct plan, run on random floats of f32, f16 and bf16, the output
// elements a collective defines as one value must be bit-identical on
// every rank when the trees say so, and must differ in some type when
// they say not (with random mantissas two orders of a sum disagree
// somewhere in a few hundred elements).
func TestConsistencyMatchesFloats(t *testing.T) {
	plans := symPlans(t)
	plans["oneshot"] = oneShot(4)
	plans["turn-taking"] = turnTaking()
	identical, not := 0, 0
	for _, name := range sortedNames(plans) {
		p := plans[name]
		size := sizes(p)[0] * 16
		claim, err := CheckConsistency(p, []int64{size}, 2)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		differs := ""
		for _, dt := range []DType{F32, F16, BF16} {
			got, err := CompareFloats(p, size, dt, 2, 11)
			if err != nil {
				t.Fatalf("%s %s: %v", name, dt, err)
			}
			if !got.Identical && differs == "" {
				differs = dt.String()
			}
			if claim.Identical && !got.Identical {
				t.Errorf("%s: claimed %s, but in %s rank %d byte %d differs from rank %d byte %d", name, claim, dt, got.A.Rank, got.A.Off, got.B.Rank, got.B.Off)
			}
		}
		if !claim.Identical && differs == "" {
			t.Errorf("%s: claimed %s, but every rank got the same bits in f32, f16 and bf16", name, claim)
		}
		if claim.Identical {
			identical++
		} else {
			not++
		}
		t.Logf("%s: %s", name, claim)
	}
	t.Logf("%d plans: %d rank-consistent, %d not", identical+not, identical, not)
	if not == 0 {
		t.Error("no plan is claimed inconsistent: the one-shot should be")
	}
}

// oneShot is an all-pairs one-shot allreduce over n ranks, out of place:
// rank r reads every peer's input and reduces it with its own in one rre
// whose sources start with its own input, so each rank sums in its own
// order. Rank 1's order (1, 0, 2, ...) equals rank 0's, because the first
// two sources commute; from rank 2 on, the orders differ.
func oneShot(n int) *ir.Plan {
	return direct(ir.AllReduce, ir.ChanMemory, n, 1, 1, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		rre := ir.Op{Code: ir.OpRre, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}}
		for i := range peers {
			rre.Src = append(rre.Src, rem(len(peers)+i, 0))
		}
		return append(append(ops, rre), finale(ir.ChanMemory, peers)...)
	})
}

// TestConsistencyExamples pins the two shapes the property tells apart:
// an all-pairs one-shot allreduce, where each rank sums in its own order,
// and a two-shot, where each chunk is reduced once and copied.
func TestConsistencyExamples(t *testing.T) {
	p := oneShot(4)
	if rep, err := Run(p, Options{Size: 64 * 4, Symbolic: true}); err != nil || !rep.OK() {
		t.Fatalf("the one-shot must be proven correct: %v %v", err, rep)
	}
	got, err := CheckConsistency(p, []int64{64 * 4}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Identical || got.A.Rank >= 2 && got.B.Rank >= 2 {
		t.Errorf("one-shot: %s; want ranks 0 or 1 against a rank from 2 on", got)
	}
	if !strings.Contains(got.String(), "different orders") {
		t.Errorf("one-shot: the summary names no pair: %s", got)
	}
	if two, err := CheckConsistency(oneShot(2), []int64{64 * 2}, 2); err != nil || !two.Identical {
		t.Errorf("a two-rank one-shot adds a+b and b+a, which are equal: %v %v", two, err)
	}
	// All-pairs and packet allreduces of the library reduce each chunk on
	// one rank and copy the result: consistent.
	for _, c := range []struct {
		file string
		want bool
	}{
		{"allreduce_allpairs_r4.json", true},
		{"allreduce_allpairs_packet_r4.json", true},
		{"allreduce_twoshot_r4.json", true},
		{"allreduce_ring_r4.json", true},
		{"allgather_ring_r4.json", true},
	} {
		p := loadPlan(t, symDir+"/"+c.file)
		got, err := CheckConsistency(p, []int64{sizes(p)[0]}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got.Identical != c.want {
			t.Errorf("%s: %s, want identical=%v", c.file, got, c.want)
		}
		if !got.Fixed {
			t.Errorf("%s: no switch op, but the order is reported as not fixed", c.file)
		}
	}
}

// turnTaking is an allreduce over 3 ranks, out of place, where rank r's
// block 0 copies its input to the output and two more blocks each add
// one peer's input to it, taking turns through semaphore 0 (a mutex) and
// reporting through semaphore 1. Correct and race-free, but which peer is
// added first depends on which block acquires the mutex first.
func turnTaking() *ir.Plan {
	sem := func(c ir.OpCode, id int) ir.Op {
		op := ir.Op{Code: c}
		op.SetSemaphoreIDs([]int{id})
		return op
	}
	p := direct(ir.AllReduce, ir.ChanMemory, 3, 1, 1, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		ops = append(ops, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}}, nop,
			sem(ir.OpSemRelease, 0), sem(ir.OpSemAcquire, 1), sem(ir.OpSemAcquire, 1), sem(ir.OpSemAcquire, 0))
		return append(ops, finale(ir.ChanMemory, peers)...)
	})
	for r := range p.GPUs {
		g := &p.GPUs[r]
		g.Semaphores = []ir.Semaphore{{}, {}}
		refs := g.ThreadBlocks[0].RemoteBufferRefs
		for i := range 2 {
			rre := ir.Op{Code: ir.OpRre, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufOutput, 0), rem(2+i, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}}
			g.ThreadBlocks = append(g.ThreadBlocks, ir.ThreadBlock{ID: 1 + i, RemoteBufferRefs: refs,
				Ops: []ir.Op{sem(ir.OpSemAcquire, 0), nop, rre, nop, sem(ir.OpSemRelease, 0), sem(ir.OpSemRelease, 1)}})
		}
	}
	return p
}

// TestConsistencyTiming: blocks that take turns through a semaphore add
// in an order decided at run time; the trees differ between
// interleavings, so the order is reported as not fixed (and the plan is
// proven, so only this check can tell).
func TestConsistencyTiming(t *testing.T) {
	p := turnTaking()
	if rep, err := Run(p, Options{Size: 64 * 3, Symbolic: true, Launches: 4}); err != nil || !rep.OK() {
		t.Fatalf("the turn-taking plan must be proven correct: %v\n%v", err, rep)
	}
	c, err := CheckConsistency(p, []int64{64 * 3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fixed || c.Timing == nil || c.Err() == nil || !strings.Contains(c.String(), "depends on which block runs first") {
		t.Errorf("turn-taking: %s; want an order that depends on timing", c)
	}
	t.Logf("turn-taking: %s", c)
	// The direct plans never take turns: fixed.
	for name, q := range collectivePlans() {
		c, err := CheckConsistency(q, []int64{sizes(q)[0]}, 2)
		if err != nil || !c.Fixed {
			t.Errorf("%s: %v %v; want a fixed order", name, c, err)
		}
	}
}
