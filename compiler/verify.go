package compiler

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Verify proves p with the CPU reference executor and reports every
// deadlock, race, unbalanced signal, wrong result and clobbered input at
// the DSL source of the ops involved. An empty result means the plan is
// proven correct.
//
// The proof proper is symbolic (cpu.Options.Symbolic): every element is a
// fingerprint of whose input it is, scratch starts as poison, and
// reductions add fingerprints, so a correct verdict means every output
// element holds each expected contribution exactly once and nothing else —
// for every reduction and every type at once. The byte-level simulation
// runs beside it as a second, independent oracle, with the plan's own
// reduction when its ops all name one. ProofRuns says which runs. sm may
// be nil (plans not compiled from source); findings then carry plan paths
// only.
func Verify(p *ir.Plan, sm *SourceMap, sizes []int64, dtypes []cpu.DType) Diagnostics {
	var ds Diagnostics
	seen := map[string]bool{}
	add := func(d dsl.Diagnostic) {
		k := d.String()
		if !seen[k] {
			seen[k] = true
			ds = append(ds, d)
		}
	}
	prs, err := ProofRuns(p, sizes, dtypes)
	if err != nil {
		add(diag.Diagnostic{Code: diag.CodeNoSize, Summary: "the plan serves no message size: " + err.Error(), Subject: sm.header()})
		return ds
	}
	red := planReduce(p)
	// The runs are independent simulations of a plan they only read, so
	// they go in parallel, one per processor; findings are merged in the
	// order of the runs, as if they had run one after another.
	type run struct {
		size int64
		opt  cpu.Options
		name string
		rep  *cpu.Report
		err  error
	}
	runs := make([]run, len(prs))
	for i, pr := range prs {
		opt := cpu.Options{Size: pr.Size, Symbolic: true, Launches: ProofLaunches}
		if !pr.Symbolic {
			opt = cpu.Options{Size: pr.Size, DType: pr.DType, Reduce: red, Launches: ProofLaunches}
		}
		runs[i] = run{size: pr.Size, name: pr.String(), opt: opt}
	}
	par := min(runtime.GOMAXPROCS(0), len(runs))
	if par <= 1 {
		for i := range runs {
			runs[i].rep, runs[i].err = cpu.Run(p, runs[i].opt)
		}
	} else {
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < par; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					runs[i].rep, runs[i].err = cpu.Run(p, runs[i].opt)
				}
			}()
		}
		for i := range runs {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	// The same finding at several sizes and types is one finding: the
	// first run's report stands, and the runs that repeat it are listed.
	// Wrong results differ in byte offsets from size to size, so only the
	// first run that has them reports them.
	also := map[string][]string{}
	first := map[string]int{}
	firstRun := map[string]string{}
	wrongRun := ""
	for _, r := range runs {
		run := r.name
		if r.err != nil {
			add(diag.Diagnostic{Code: diag.CodeCannotRun, Summary: fmt.Sprintf("cannot simulate (%s): %v", r.name, r.err), Subject: sm.header()})
			continue
		}
		for _, d := range reportDiags(r.rep, sm, run) {
			if d.Code == diag.CodeWrongResult {
				if wrongRun != "" && wrongRun != run {
					also["wrong"] = appendNew(also["wrong"], run)
					continue
				}
				wrongRun = run
			}
			k := fmt.Sprintf("%s@%v", d.Summary, d.Subject.Start)
			if i, ok := first[k]; ok && ds[i].Detail != d.Detail {
				// The same finding again in the run that reported it
				// (another launch) adds nothing; in another run, its name.
				if firstRun[k] != run {
					also[k] = appendNew(also[k], run)
				}
				continue
			}
			if _, ok := first[k]; !ok {
				first[k], firstRun[k] = len(ds), run
			}
			add(d)
		}
	}
	for k, runs := range also {
		if k == "wrong" {
			for i := range ds {
				if ds[i].Code == diag.CodeWrongResult {
					ds[i].Detail += "; also wrong at " + foldRuns(runs)
					break
				}
			}
			continue
		}
		ds[first[k]].Detail += "; the same at " + foldRuns(runs)
	}
	ds.Sort()
	return ds
}

func appendNew(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

// foldRuns lists at most three runs and counts the rest.
func foldRuns(runs []string) string {
	if len(runs) <= 3 {
		return strings.Join(runs, "; ")
	}
	return fmt.Sprintf("%s and %d more runs", strings.Join(runs[:3], "; "), len(runs)-3)
}

func reportDiags(rep *cpu.Report, sm *SourceMap, run string) Diagnostics {
	var ds Diagnostics
	at := func(pl cpu.Place) (dsl.Range, string) {
		if r, ok := sm.Range(pl.Rank, pl.Block, pl.Op, pl.Inner); ok {
			return r, fmt.Sprintf("%s at %s", pl, r.Start)
		}
		return sm.header(), pl.String()
	}
	for _, s := range rep.Deadlocks {
		r, where := at(s.Place)
		ds = append(ds, diag.Diagnostic{Code: diag.CodeDeadlock, Summary: fmt.Sprintf("deadlock: rank %d block %d waits forever (%s)", s.Rank, s.Block, s.Waiting),
			Detail: fmt.Sprintf("stuck op %s; run %s", where, run), Subject: r})
	}
	for _, rc := range rep.Races {
		ra, wa := at(rc.A.Place)
		_, wb := at(rc.B.Place)
		ds = append(ds, diag.Diagnostic{Code: diag.CodeRace, Summary: fmt.Sprintf("race on rank %d's %s bytes [%d:%d)", rc.A.BufferRank, rc.A.Buffer.Long(), max(rc.A.Off, rc.B.Off), min(rc.A.End, rc.B.End)),
			Detail: fmt.Sprintf("%s %s; unordered with %s %s; run %s", rw(rc.A.Write), wa, rw(rc.B.Write), wb, run), Subject: ra})
	}
	for _, u := range rep.Unbalanced {
		r, where := at(u.Place)
		ds = append(ds, diag.Diagnostic{Code: diag.CodeUnbalanced, Summary: fmt.Sprintf("signal never waited for (%s, %d token(s) left)", u.Channel, u.Count),
			Detail: fmt.Sprintf("%s; add the matching wait on the peer or drop the signal", where), Subject: r})
	}
	// Wrong results are reported at the statement whose op last wrote the
	// element (the one that wrote the wrong thing, or should have added
	// what is missing), in words when the symbolic run decoded them.
	writer := func(w *cpu.Place, launch int) (dsl.Range, string) {
		if w == nil {
			return sm.header(), ""
		}
		r, where := at(*w)
		return r, fmt.Sprintf("; last written by %s in launch %d", where, launch)
	}
	// Findings that say the same thing at the same statement on several
	// ranks are one diagnostic: "... (and on 7 more ranks)".
	type group struct {
		f     cpu.Finding
		r     dsl.Range
		by    string
		ranks map[int]bool
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, f := range rep.Findings {
		r, by := writer(f.Writer, f.WriterLaunch)
		k := fmt.Sprintf("%s@%v", ownRank.ReplaceAllString(f.Explain, "${1}#"), r.Start)
		if g := byKey[k]; g != nil {
			g.ranks[f.Rank] = true
			continue
		}
		g := &group{f: f, r: r, by: by, ranks: map[int]bool{f.Rank: true}}
		byKey[k] = g
		groups = append(groups, g)
	}
	for i, g := range groups {
		if i == 3 {
			break // the first few say enough; the total is in the detail
		}
		f := g.f
		what := f.Explain
		if what == "" {
			what = fmt.Sprintf("rank %d output bytes [%d:%d) differ from the collective's definition", f.Rank, f.Off, f.End)
		}
		if n := len(g.ranks) - 1; n > 0 {
			what += fmt.Sprintf(" (and on %d more rank%s)", n, plural(n))
		}
		ds = append(ds, diag.Diagnostic{Code: diag.CodeWrongResult, Summary: "wrong result: " + what,
			Detail: fmt.Sprintf("rank %d output bytes [%d:%d), %d elements, launch %d%s; %d wrong elements in all; run %s", f.Rank, f.Off, f.End, f.Elems, f.Launch, g.by, rep.WrongTotal, run), Subject: g.r})
	}
	if len(rep.Findings) == 0 {
		for i, m := range rep.Wrong {
			if i == 3 {
				break
			}
			r, by := writer(m.Writer, m.WriterLaunch)
			ds = append(ds, diag.Diagnostic{Code: diag.CodeWrongResult, Summary: fmt.Sprintf("wrong result: rank %d output byte %d is %s, want %s (launch %d)", m.Rank, m.Off, m.Got, m.Want, m.Launch),
				Detail: fmt.Sprintf("%d wrong elements in all%s; run %s", rep.WrongTotal, by, run), Subject: r})
		}
	}
	for i, c := range rep.Clobbered {
		if i == 3 {
			break
		}
		r, by := writer(c.Writer, c.Launch)
		ds = append(ds, diag.Diagnostic{Code: diag.CodeInputClobbered, Summary: fmt.Sprintf("input clobbered: rank %d's input bytes [%d:%d) changed, but an out-of-place collective must leave its input as it found it", c.Rank, c.Off, c.End),
			Detail: fmt.Sprintf("%d input bytes changed in all%s; write to scratch or the output instead; run %s", rep.ClobberedBytes, by, run), Subject: r})
	}
	if len(ds) == 0 && !rep.OK() {
		ds = append(ds, diag.Diagnostic{Code: verdictCode(rep.Verdict), Summary: "verdict: " + rep.Verdict.String(), Detail: run, Subject: sm.header()})
	}
	return ds
}

// verdictCode is the code of a run whose report names no finding but
// its verdict.
func verdictCode(v cpu.Verdict) string {
	switch v {
	case cpu.Deadlock:
		return diag.CodeDeadlock
	case cpu.Race:
		return diag.CodeRace
	case cpu.Unbalanced:
		return diag.CodeUnbalanced
	}
	return diag.CodeWrongResult
}

func rw(w bool) string {
	if w {
		return "write by"
	}
	return "read by"
}

// planReduce is the reduction the byte-level oracle runs with: the one
// every reducing op of p names, when they all name the same one other than
// sum (so `option reduce = max` is checked as max); otherwise sum.
// ProofRun is one simulation of a proof: symbolic, or byte level in DType.
type ProofRun struct {
	Size     int64
	Symbolic bool
	DType    cpu.DType
}

func (r ProofRun) String() string {
	if r.Symbolic {
		return fmt.Sprintf("%d bytes, symbolic", r.Size)
	}
	return fmt.Sprintf("%d bytes, %s", r.Size, r.DType)
}

// ProofRuns lists the runs Verify makes: the symbolic proof at each of
// sizes (nil: ProofSizes, which cover every size the plan's rule admits),
// and the byte level, the second oracle, at the smallest and the largest
// size in the first of dtypes and at the largest in the others.
//
// Large plans cost seconds a run, most of it ordering analysis that is the
// same at every size. For one that keeps whole chunks, one admitted size
// decides the verdict (docs/rationale.md); the other sizes are a safety
// net that the smaller worlds of the same algorithm, the differential
// tests and the corpus exercise. So from bigPlan ranks, with sizes from the
// rule, the proof is symbolic at the smallest size only and the byte level
// runs once, at the largest (realistic lengths) in the first type. Plans
// that cut chunks (tbg_info, pipelines) keep every size.
func ProofRuns(p *ir.Plan, sizes []int64, dtypes []cpu.DType) ([]ProofRun, error) {
	big := sizes == nil && len(p.GPUs) >= bigPlan && !cutsChunks(p)
	if sizes == nil {
		var err error
		if sizes, err = ProofSizes(p); err != nil {
			return nil, err
		}
	}
	last := len(sizes) - 1
	var out []ProofRun
	for i, size := range sizes {
		if !big || i == 0 {
			out = append(out, ProofRun{Size: size, Symbolic: true})
		}
		for k, dt := range dtypes {
			keep := i == last || (i == 0 && k == 0)
			if big {
				keep = i == last && k == 0
			}
			if keep {
				out = append(out, ProofRun{Size: size, DType: dt})
			}
		}
	}
	return out, nil
}

// bigPlan is the rank count from which ProofRuns trims the runs.
const bigPlan = 64

func planReduce(p *ir.Plan) ir.ReduceOp {
	red := ir.ReduceNone
	var walk func(ops []ir.Op) bool
	walk = func(ops []ir.Op) bool {
		for i := range ops {
			op := &ops[i]
			if op.Code == ir.OpPipeline {
				if !walk(op.Ops()) {
					return false
				}
				continue
			}
			if !op.Info().Reduces {
				continue
			}
			r := op.ReduceOp()
			if r == ir.ReduceNone {
				r = ir.ReduceSum
			}
			if red != ir.ReduceNone && red != r {
				return false
			}
			red = r
		}
		return true
	}
	for g := range p.GPUs {
		for b := range p.GPUs[g].ThreadBlocks {
			if !walk(p.GPUs[g].ThreadBlocks[b].Ops) {
				return ir.ReduceSum
			}
		}
	}
	if red == ir.ReduceNone {
		return ir.ReduceSum
	}
	return red
}

// ownRank matches the part of an explanation that names the rank whose
// output it is about (its own poisoned output bytes), which differs
// between ranks that are otherwise wrong the same way.
var ownRank = regexp.MustCompile(`(poison from rank )[0-9]+`)

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
