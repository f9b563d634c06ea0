package cpu

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// rangesVsElements runs p symbolically in both modes and returns how
// their reports differ, "" when they agree: verdict, every
// synchronisation finding, the count and the places of wrong elements
// with their writers and decoded terms, the findings with their words,
// and clobbered input.
func rangesVsElements(p *ir.Plan, opt Options) (string, *Report, error) {
	opt.Symbolic = true
	ro, eo := opt, opt
	eo.PerElement = true
	rr, err := Run(p, ro)
	if err != nil {
		return "", nil, err
	}
	er, err := Run(p, eo)
	if err != nil {
		return "", nil, fmt.Errorf("the element mode fails where the range mode runs: %w", err)
	}
	return reportsDiffer(rr, er), er, nil
}

func reportsDiffer(rr, er *Report) string {
	var d []string
	if rr.Verdict != er.Verdict {
		d = append(d, fmt.Sprintf("verdict: ranges %s, elements %s", rr.Verdict, er.Verdict))
	}
	same := func(what string, a, b any) {
		if x, y := fmt.Sprint(a), fmt.Sprint(b); x != y {
			d = append(d, fmt.Sprintf("%s: ranges %s, elements %s", what, x, y))
		}
	}
	same("races", rr.Races, er.Races)
	same("deadlocks", rr.Deadlocks, er.Deadlocks)
	same("unbalanced", rr.Unbalanced, er.Unbalanced)
	same("wrong elements", rr.WrongTotal, er.WrongTotal)
	same("clobbered bytes", rr.ClobberedBytes, er.ClobberedBytes)
	same("clobbered", rr.Clobbered, er.Clobbered)
	type wrong struct {
		l, r, wl int
		off      int64
		w, terms string
	}
	key := func(ms []Mismatch) []wrong {
		var out []wrong
		for _, m := range ms {
			w := "nobody"
			if m.Writer != nil {
				w = m.Writer.String()
			}
			out = append(out, wrong{m.Launch, m.Rank, m.WriterLaunch, m.Off, w, fmt.Sprint(m.Terms, m.Explain)})
		}
		return out
	}
	same("first wrong elements", key(rr.Wrong), key(er.Wrong))
	// Findings: the same ranges, writers, terms and words, but where the
	// element mode ran out of its decoding budget (explainBudget
	// elements a run) before the range mode did, which decodes once a
	// piece: there both cover the same bytes with the same writers.
	if len(rr.Findings) < maxFindings && len(er.Findings) < maxFindings {
		same("findings", coverage(rr.Findings), coverage(er.Findings))
	}
	if er.WrongTotal <= explainBudget {
		for k := range min(len(rr.Findings), len(er.Findings)) {
			same(fmt.Sprintf("finding %d", k), rr.Findings[k], er.Findings[k])
		}
	}
	return strings.Join(d, "\n")
}

// coverage folds findings into maximal byte ranges per launch, rank and
// writer.
func coverage(fs []Finding) []string {
	var out []string
	var last Finding
	for i, f := range fs {
		if i > 0 && f.Launch == last.Launch && f.Rank == last.Rank && f.Off == last.End && samePlace(f.Writer, last.Writer) && f.WriterLaunch == last.WriterLaunch {
			last.End = f.End
			continue
		}
		if i > 0 {
			out = append(out, fmt.Sprintf("l%d r%d [%d:%d) %v/%d", last.Launch, last.Rank, last.Off, last.End, last.Writer, last.WriterLaunch))
		}
		last = f
	}
	if len(fs) > 0 {
		out = append(out, fmt.Sprintf("l%d r%d [%d:%d) %v/%d", last.Launch, last.Rank, last.Off, last.End, last.Writer, last.WriterLaunch))
	}
	return out
}

// TestRangesAgreeWithElements: the library plans, the upstream fixtures
// and the direct plans at random admitted sizes, 1 to 5 launches, both
// LL widths, and their single-point mutations (wrong results, races,
// deadlocks): the range mode's report agrees with the element mode's.
func TestRangesAgreeWithElements(t *testing.T) {
	plans := symPlans(t)
	rng := rand.New(rand.NewSource(61))
	perPlan, limit := 3, 6
	if fulltest.Sample() {
		perPlan, limit = 1, 2
	}
	runs, wrong := 0, 0
	check := func(t *testing.T, name string, p *ir.Plan, opt Options) {
		t.Helper()
		diff, er, err := rangesVsElements(p, opt)
		if err != nil {
			return // refused at setup by both: mutants may break a plan's geometry
		}
		runs++
		if er.Verdict == WrongResult {
			wrong++
		}
		if diff != "" {
			t.Errorf("%s at %d bytes, %d launches, ll%d: the modes disagree:\n%s\nelement report:\n%s", name, opt.Size, opt.Launches, opt.LLWidth, diff, er)
		}
	}
	for _, name := range sortedNames(plans) {
		p := plans[name]
		rule, err := p.SizeRule()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for range perPlan {
			size := rule.Min + rule.Granularity*rng.Int63n(300)
			ll := 16
			if p.Protocol == ir.LL && rng.Intn(2) == 0 {
				ll = 8
			}
			check(t, name, p, Options{Size: size, Launches: 1 + rng.Intn(5), LLWidth: ll, Seed: uint64(rng.Intn(1000))})
		}
		for _, m := range append(fulltest.Stride(mutations(p), 8), dataMutations(p, limit)...) {
			q := clonePlan(p)
			m.apply(q)
			check(t, name+": "+m.name, q, Options{Size: sizes(p)[0] * 4, Launches: 1 + rng.Intn(5), Seed: 9})
		}
	}
	t.Logf("%d runs compared, %d of them wrong results", runs, wrong)
	if runs < 100 || wrong < 10 {
		t.Errorf("too few comparisons (%d runs, %d wrong): the test would not catch a disagreement", runs, wrong)
	}
}

// TestVmapAgreesWithBytes drives the run store with random copies,
// reductions and comparisons against a per-byte model of the same field
// values.
func TestVmapAgreesWithBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	f := newField(11)
	const n = 97
	for iter := range 200 {
		// Three arrays; the model holds every byte's value v·g^x.
		var ms [3]vmap
		var model [3][n]fv
		for a := range ms {
			ms[a] = newVmap(n, f.poison(iter, a))
			for x := range n {
				model[a][x] = f.poison(iter, a).mul(f.pow(int64(x)))
			}
		}
		for range 40 {
			ln := 1 + rng.Int63n(20)
			a, b := rng.Intn(3), rng.Intn(3)
			so, do := rng.Int63n(n-ln+1), rng.Int63n(n-ln+1)
			d := ms[a].get(f, so, so+ln, nil)
			var mv []fv
			for x := range ln {
				mv = append(mv, model[a][so+x])
			}
			if rng.Intn(2) == 0 {
				c := rng.Intn(3)
				co := rng.Int63n(n - ln + 1)
				d = sumData([]vdata{d, ms[c].get(f, co, co+ln, nil)}, ln)
				for x := range ln {
					mv[x] = mv[x].add(model[c][co+x])
				}
			}
			ms[b].set(f, do, d)
			copy(model[b][do:do+ln], mv)
		}
		for a := range ms {
			runs := ms[a].runs
			if runs[0].lo != 0 || runs[len(runs)-1].hi != n {
				t.Fatalf("runs do not cover the array: %v", runs)
			}
			for k, r := range runs {
				if k > 0 && (r.lo != runs[k-1].hi || r.v == runs[k-1].v) {
					t.Fatalf("runs not contiguous and maximal at %d: %v", k, runs)
				}
				for x := r.lo; x < r.hi; x++ {
					if got := r.v.mul(f.pow(x)); got != model[a][x] {
						t.Fatalf("iteration %d array %d byte %d: runs say %v, model %v", iter, a, x, got, model[a][x])
					}
				}
			}
			// diffRanges finds exactly the bytes that differ.
			other := ms[(a+1)%3].get(f, 0, n, nil)
			mine := ms[a].get(f, 0, n, nil)
			var bad [n]bool
			diffRanges(mine, other, func(lo, hi int64) {
				for x := lo; x < hi; x++ {
					bad[x] = true
				}
			})
			for x := range int64(n) {
				if want := model[a][x] != model[(a+1)%3][x]; bad[x] != want {
					t.Fatalf("diffRanges at byte %d: %v, want %v", x, bad[x], want)
				}
			}
		}
	}
}

// TestFieldArithmetic checks the Mersenne-prime operations against
// math/big-free identities: g·g⁻¹ = 1, powers add, and a reduction of
// values near the modulus.
func TestFieldArithmetic(t *testing.T) {
	f := newField(5)
	for _, e := range []int64{0, 1, 7, 1 << 20, 1<<40 + 3} {
		if got := f.pow(e).mul(f.pow(-e)); got != (fv{1, 1}) {
			t.Errorf("g^%d·g^-%d = %v", e, e, got)
		}
		if got, want := f.pow(e).mul(f.pow(5)), f.pow(e+5); got != want {
			t.Errorf("g^%d·g^5 = %v, want %v", e, got, want)
		}
	}
	// Powers walked in order (the decoder's tables) take one step from
	// the last one; they must equal square-and-multiply.
	g := newField(9)
	for _, e := range []int64{8, 16, 24, 1 << 17, 1<<17 + 8, 1<<17 + 3, 1<<17 + 67, 5, 13, 1 << 40, 1<<40 + 64} {
		var want fv
		for i := range want {
			want[i] = mpPow(g.g[i], uint64(e))
		}
		if got := g.pow(e); got != want {
			t.Errorf("g^%d in order: %v, want %v", e, got, want)
		}
	}
	if got := mpMul(mp-1, mp-1); got != 1 {
		t.Errorf("(-1)·(-1) = %d", got)
	}
	if got := mpAdd(mp-1, 1); got != 0 {
		t.Errorf("(-1)+1 = %d", got)
	}
}
