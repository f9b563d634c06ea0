package ir

import (
	"strings"
	"testing"
)

func TestSizeRule(t *testing.T) {
	for _, c := range []struct {
		fixture  string
		uniform  bool
		gran     int64
		min      int64
		fragile  string
		admitted []int64
		refused  []int64
	}{
		// Every op keeps its chunk index: any whole number of units.
		{fixture: "allreduce.json", gran: 16, min: 256, admitted: []int64{256, 272, 4000}, refused: []int64{240, 4004}},
		// Rank 1 moves chunk 2 into chunk 0: only even splits.
		{fixture: "allreduce_packet.json", gran: 64, min: 64, fragile: "pairs chunk 2 with chunk 0", admitted: []int64{64, 1 << 20}, refused: []int64{80, 1000, 4000}},
		// Read as uniform scratch, the chunk 2 -> 0 move no longer limits
		// it, but chunks [2, 4) go into two scratch slots in one op, and
		// their boundary lands on the slot boundary only at even splits.
		{fixture: "allreduce_packet.json", uniform: true, gran: 64, min: 64, fragile: "pairs data chunks [2, 4) with scratch slots", admitted: []int64{64, 4096}, refused: []int64{80, 4000}},
	} {
		p := loadFixture(t, "../testdata/peer-plans/"+c.fixture)
		p.UniformScratch = c.uniform
		r, err := p.SizeRule()
		if err != nil {
			t.Fatalf("%s: %v", c.fixture, err)
		}
		if r.Granularity != c.gran || r.Min != c.min || !strings.Contains(r.Fragile, c.fragile) {
			t.Errorf("%s: rule %s (%s), want multiples of %d from %d, fragile %q", c.fixture, r, r.Why(), c.gran, c.min, c.fragile)
		}
		for _, s := range c.admitted {
			if err := r.Check(s); err != nil {
				t.Errorf("%s: %d refused: %v", c.fixture, s, err)
			}
		}
		for _, s := range c.refused {
			err := r.Check(s)
			if err == nil || !strings.Contains(err.Error(), "outside the plan's size rule: "+r.String()) || ErrorCode(err) != CodeSizeRefused {
				t.Errorf("%s: %d: got %v, want a refusal naming the rule, code %s", c.fixture, s, err, CodeSizeRefused)
			}
		}
	}
}

func TestSizeRuleNarrowedByPlan(t *testing.T) {
	p := loadFixture(t, "../testdata/peer-plans/allreduce.json")
	p.MinMessageSize, p.MaxMessageSize, p.SizeGranularity = 1000, 1<<20, 48
	r, err := p.SizeRule()
	if err != nil {
		t.Fatal(err)
	}
	if r.Granularity != 48 || r.Min != 1008 || r.Max != 1<<20 {
		t.Fatalf("rule %s, want multiples of 48 from 1008 up to 1048576", r)
	}
	if n, ok := r.Next(1); !ok || n != 1008 {
		t.Errorf("Next(1) = %d, %v", n, ok)
	}
	if _, ok := r.Next(1<<20 + 1); ok {
		t.Errorf("Next past the maximum found a size")
	}
	p.MinMessageSize = 1<<20 + 1
	if _, err := p.SizeRule(); err == nil {
		t.Errorf("a plan whose minimum is above its maximum has a rule")
	}
}

// A malformed plan (a put with two destinations and no source, as a fuzzer or
// a hand edit makes) gets a rule or an error, never a panic: cpu.Run asks
// for the rule before anything validates the plan.
func TestSizeRuleMalformedPut(t *testing.T) {
	p := loadFixture(t, "../testdata/peer-plans/reduce.json")
	for g := range p.GPUs {
		for b := range p.GPUs[g].ThreadBlocks {
			for i := range p.GPUs[g].ThreadBlocks[b].Ops {
				if op := &p.GPUs[g].ThreadBlocks[b].Ops[i]; op.Info().Paired && len(op.Dst) > 0 {
					op.Src, op.Dst = nil, append(op.Dst, op.Dst[0])
				}
			}
		}
	}
	_, _ = p.SizeRule()
}
