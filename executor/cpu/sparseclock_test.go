package cpu

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestSparseClocksAgree holds the sparse clocks to the exact ones on
// every fixture and every single-point mutation of one (TestMutations-
// Rejected's, most of them races): a sparse run either stops at an
// access it cannot order (errClockMiss, and Run repeats it exactly) or
// reports exactly what the exact run reports. A sparse clock that
// claimed an order the exact clocks lack would pass a racy mutation
// here, and fail this test.
func TestSparseClocksAgree(t *testing.T) {
	plans := fixtures(t)
	for name, p := range collectivePlans() {
		plans["direct/"+name] = p
	}
	decided, missed := 0, 0
	var asIs []string // correct plans the sparse clocks did not prove
	for _, name := range sortedNames(plans) {
		p := plans[name]
		cases := []mutation{{"as is", nil}}
		cases = append(cases, mutations(p)...)
		for _, m := range cases {
			q := p
			if m.apply != nil {
				q = clonePlan(p)
				m.apply(q)
			}
			opt := Options{Size: sizes(p)[0] * 4, DType: I32, Seed: 3, Launches: 3}
			for _, sym := range []bool{false, true} {
				opt.Symbolic = sym
				exactOpt := opt
				exactOpt.exactClocks = true
				want, werr := runMode(q, exactOpt)
				got, gerr := runMode(q, opt)
				if errors.Is(gerr, errClockMiss) {
					missed++
					if m.apply == nil && werr == nil && want.OK() {
						asIs = append(asIs, name)
					}
					continue
				}
				if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
					t.Errorf("%s, %s, symbolic %v: sparse error %v, exact error %v", name, m.name, sym, gerr, werr)
					continue
				}
				if gerr != nil {
					continue
				}
				decided++
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, %s, symbolic %v: sparse clocks report\n%s\nexact clocks report\n%s", name, m.name, sym, got, want)
				}
			}
		}
	}
	t.Logf("%d runs decided by the sparse clocks, %d repeated on exact clocks; correct plans repeated: %v", decided, missed, asIs)
	if decided == 0 {
		t.Fatal("the sparse clocks decided nothing")
	}
}

// TestExactRepeatMemory: a run the sparse clocks cannot decide (a racy
// fixture) is repeated on the exact clocks, and that repeat is held to
// their own estimate: under a cap between the two estimates the sparse
// pass runs and the repeat is refused with ExactClockMemory's figure;
// under a cap above both, the race is reported.
func TestExactRepeatMemory(t *testing.T) {
	p := loadPlan(t, filepath.Join(fixtureDir, "reduce_tbg.json"))
	sparse, exact := ClockMemory(p), ExactClockMemory(p)
	if sparse >= exact {
		t.Fatalf("estimates: sparse %d, exact %d", sparse, exact)
	}
	opt := Options{Size: sizes(p)[0], DType: F32, MaxMemory: (sparse + exact) / 2}
	_, err := Run(p, opt)
	var me *MemoryError
	if !errors.As(err, &me) || me.Need != exact {
		t.Errorf("cap between the estimates: got %v, want a MemoryError needing %d", err, exact)
	}
	opt.MaxMemory = 1 << 30
	rep, err := Run(p, opt)
	if err != nil || len(rep.Races) == 0 {
		t.Errorf("cap 1 GiB: got %v, %v; want the fixture's race", err, rep)
	}
}

// TestPlaceNumbers: every op's place number, counted in setup's order
// (each op, then a pipeline's body), names that op, in plans with and
// without pipelines (a place is found from its block, not stored).
func TestPlaceNumbers(t *testing.T) {
	for _, name := range []string{"allreduce_pipeline.json", "allreduce.json"} {
		p := loadPlan(t, filepath.Join(fixtureDir, name))
		s := &sim{p: p, opt: Options{Size: sizes(p)[0], DType: F32}}
		if err := s.options(); err != nil {
			t.Fatal(err)
		}
		if err := s.setup(); err != nil {
			t.Fatal(err)
		}
		id := int32(0)
		check := func(r, b, op, inner int, code ir.OpCode) {
			want := Place{Rank: r, Block: b, Op: op, Inner: inner, OpName: code.String()}
			if got := s.place(id); got != want {
				t.Errorf("%s: place %d is %v, want %v", name, id, got, want)
			}
			id++
		}
		for r := range p.GPUs {
			for b, tb := range p.GPUs[r].ThreadBlocks {
				for i, op := range tb.Ops {
					check(r, b, i, -1, op.Code)
					for j, in := range op.Ops() {
						check(r, b, i, j, in.Code)
					}
				}
			}
		}
		if id != s.opPlaces {
			t.Errorf("%s: %d ops, %d places", name, id, s.opPlaces)
		}
	}
}
