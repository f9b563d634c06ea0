package compiler

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/par"
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
	return VerifyWith(p, sm, VerifyOptions{Sizes: sizes, DTypes: dtypes})
}

// proofRun is one run of the proof; a variable so a test can make it
// panic, which no correct executor does.
var proofRun = cpu.Run

// VerifyOptions say what Verify proves at and how much memory it may use.
type VerifyOptions struct {
	Sizes  []int64     // message sizes; nil: the rule's proof sizes (ProofRuns)
	DTypes []cpu.DType // byte-level data types; nil: ProofRuns' default
	// MaxMemory caps the proof's memory (0: 16 GiB, cpu.Options'
	// default). Runs go in parallel only as far as their estimates
	// (cpu.ClockMemory plus buffers) fit together; a run whose estimate
	// alone is past the cap is refused before it allocates, and one whose
	// heap grows past it is stopped: "the proof could not run", never a
	// verdict on the plan.
	MaxMemory int64
}

// VerifyWith is Verify with options.
func VerifyWith(p *ir.Plan, sm *SourceMap, vo VerifyOptions) Diagnostics {
	sizes, dtypes := vo.Sizes, vo.DTypes
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
			// The byte level is the second oracle of results; races are
			// the symbolic runs' (the same schedule and clocks whatever
			// the values), and skipping them makes this run 5 to 25 times
			// cheaper on large plans (docs/rationale.md).
			opt = cpu.Options{Size: pr.Size, DType: pr.DType, Reduce: red, Launches: ProofLaunches, NoRaces: true}
		}
		opt.MaxMemory = vo.MaxMemory
		runs[i] = run{size: pr.Size, name: pr.String(), opt: opt}
	}
	// A run that panics (a bug of the executor) is that run's error, not
	// a crash of the process hosting the compiler.
	workers := min(runtime.GOMAXPROCS(0), len(runs), runsThatFit(p, prs, vo.MaxMemory))
	par.ForEach(workers, len(runs), func(_, i int) {
		r := &runs[i]
		r.err = par.Try(func() (err error) {
			r.rep, err = proofRun(p, r.opt)
			return err
		})
	})
	// A wrong result is blamed on its output's last writer; where that
	// op only passed on data read too early, a second run with
	// provenance names the read (cpu.Finding.Reader). Only wrong plans
	// pay for it.
	for i := range runs {
		r := &runs[i]
		if r.err == nil && r.opt.Symbolic && len(r.rep.Findings) > 0 {
			opt := r.opt
			opt.Provenance = true
			var rep *cpu.Report
			if err := par.Try(func() (err error) { rep, err = proofRun(p, opt); return err }); err == nil {
				r.rep = rep
			}
		}
	}
	// The same finding at several sizes and types is one finding (its
	// fold key leaves out ranks, byte ranges and launches): the first
	// run's report stands, and the runs that repeat it are listed. Wrong
	// results differ in byte offsets from size to size, so only the first
	// run that has them reports them.
	also := map[string][]string{}
	first := map[string]int{}
	firstRun := map[string]string{}
	wrongRun := ""
	for _, r := range runs {
		run := r.name
		if r.err != nil {
			// A run that could not start found nothing either way; the
			// same refusal at several runs is one diagnostic.
			k := "cannot|" + r.err.Error()
			if _, ok := first[k]; ok {
				also[k] = appendNew(also[k], run)
				continue
			}
			first[k], firstRun[k] = len(ds), run
			detail := "this run neither proves nor refutes the plan"
			if me := (*cpu.MemoryError)(nil); errors.As(r.err, &me) {
				detail += "; raise the memory cap (msccl-compile compile --proof-memory SIZE, VerifyOptions.MaxMemory) where the host has the memory"
			}
			code, summary := diag.CodeCannotRun, fmt.Sprintf("the proof could not run (%s): %v", r.name, r.err)
			if pe := (*par.PanicError)(nil); errors.As(r.err, &pe) {
				code, summary = diag.CodeInternal, fmt.Sprintf("internal error in the proof (%s): %v", r.name, r.err)
				detail += "; this is a bug of msccl-go: please report it with the plan"
			}
			add(diag.Diagnostic{Code: code, Summary: summary, Detail: detail, Subject: sm.header()})
			continue
		}
		for _, f := range findings(r.rep, sm, run) {
			d := f.d
			if d.Code == diag.CodeWrongResult {
				if wrongRun != "" && wrongRun != run {
					also["wrong"] = appendNew(also["wrong"], run)
					continue
				}
				wrongRun = run
			}
			k := f.key
			if _, ok := first[k]; ok {
				if firstRun[k] != run {
					also[k] = appendNew(also[k], run)
				}
				continue
			}
			first[k], firstRun[k] = len(ds), run
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

// runsThatFit is how many of the runs may go at once within maxMemory
// (0: 16 GiB), by their largest estimate: clocks plus, at the byte level,
// buffers (a symbolic run holds byte ranges, not bytes). At least one:
// a run that does not fit alone is refused by cpu.Run itself.
func runsThatFit(p *ir.Plan, prs []ProofRun, maxMemory int64) int {
	if maxMemory <= 0 {
		maxMemory = 16 << 30
	}
	most := cpu.ClockMemory(p)
	clocks := most
	for _, pr := range prs {
		if pr.Symbolic {
			continue
		}
		if need, err := cpu.BufferMemory(p, pr.Size, ProofLaunches, false); err == nil {
			most = max(most, clocks+need)
		}
	}
	if most <= 0 {
		return len(prs)
	}
	return int(max(1, min(int64(len(prs)), maxMemory/most)))
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

// planReduce is the reduction the byte-level oracle runs with: the plan's
// own (ir.Plan.RunReduce: the one its reduce_op fixes, so `option reduce =
// max` is checked as max, or sum when it serves every reduction). A plan
// that serves none gets sum, which every run then refuses, naming why.
func planReduce(p *ir.Plan) ir.ReduceOp {
	red, err := p.RunReduce(ir.ReduceNone)
	if err != nil {
		return ir.ReduceSum
	}
	return red
}
