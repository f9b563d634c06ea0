package msccl

import (
	"fmt"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/hostmem"
	"github.com/msccl-go/msccl-go/internal/size"
)

// The proof and single CPU runs with their findings as data, for front
// ends that report them (libmsccl's msccl_verify, Python's
// Plan.verify): what msccl-compile compile and sim print, without the
// printing.

// SourceMap ties a compiled plan's ops to the program's statements, so
// findings name lines.
type SourceMap = compiler.SourceMap

// Diagnostics are positioned diagnostics (errors, warnings, findings).
type Diagnostics = diag.Diagnostics

// ProofLaunches is how many back-to-back launches the proof runs.
const ProofLaunches = compiler.ProofLaunches

// CompileSource compiles program src (filename names it in diagnostics)
// with defines; the diagnostics, warnings included, come back whether or
// not it compiled (p is nil or ds has errors when it did not). It does
// not prove the plan (VerifyPlan, Prove).
func CompileSource(filename string, src []byte, defines map[string]int64) (p *Plan, sm *SourceMap, ds Diagnostics) {
	p, sm, cds := compiler.CompileSource(filename, src, defines, compiler.Options{})
	return p, sm, Diagnostics(cds)
}

// Finding is one diagnostic of a proof or run with its kind (deadlock,
// race, unbalanced, wrong result, clobbered, error).
type Finding struct {
	diag.Diagnostic
	Kind string
}

// Verdict is the outcome of VerifyPlan or SimulatePlan.
type Verdict struct {
	OK       bool
	Verdict  string   // correct, deadlock, race, unbalanced, wrong result, error
	Runs     []string // the simulations made
	Findings []Finding
	Steps    int64 // SimulatePlan only
	// Consistency, proof only: whether every rank receives the same bits
	// (ProveWith), checked once the plan is proven; nil when it is not
	// proven, has more than compiler.ConsistencyMaxRanks ranks and
	// consistency was not required, or the check could not run.
	// ConsistencyLine is what msccl-compile compile prints about it
	// (Consistency.String, or why it was not checked).
	Consistency     *Consistency
	ConsistencyLine string
	// Inconsistent, with VerifyOptions.RequireConsistent: why a proven
	// plan is refused (OK false, Verdict VerdictInconsistent), in the
	// words of msccl-compile compile --require-consistent.
	Inconsistent string
}

// VerdictInconsistent is the Verdict of a proven plan refused because
// consistency was required and it is not rank-consistent.
const VerdictInconsistent = "not rank-consistent"

func verdictOf(ds Diagnostics, runs []string) *Verdict {
	v := &Verdict{OK: !ds.HasErrors(), Verdict: compiler.VerdictOf(compiler.Diagnostics(ds)), Runs: runs, Findings: []Finding{}}
	for _, d := range ds {
		v.Findings = append(v.Findings, Finding{d, compiler.FindingKind(d)})
	}
	return v
}

// VerifyPlan proves p on the CPU executor (compiler.Verify): every size
// class of its rule (or the sizes given), dtypes at the byte level,
// ProofLaunches launches. sm may be nil. Unlike Prove it returns every
// finding and caches nothing.
func VerifyPlan(p *Plan, sm *SourceMap, sizes []int64, dtypes []DType) *Verdict {
	return VerifyPlanWith(p, sm, VerifyOptions{Sizes: sizes, DTypes: dtypes})
}

// VerifyOptions are VerifyPlanWith's.
type VerifyOptions struct {
	Sizes  []int64 // the message sizes to prove at; nil: every size class of the rule
	DTypes []DType // the byte-level runs' types; nil: compiler.ProofRuns' default
	// RequireConsistent refuses a proven plan that is not rank-consistent
	// (ProveOptions.RequireConsistent).
	RequireConsistent bool
}

// VerifyPlanWith is VerifyPlan with options; a proven plan's verdict also
// says whether it is rank-consistent, as msccl-compile compile does.
func VerifyPlanWith(p *Plan, sm *SourceMap, o VerifyOptions) *Verdict {
	runs := []string{}
	if rs, err := compiler.ProofRuns(p, o.Sizes, o.DTypes); err == nil {
		for _, r := range rs {
			runs = append(runs, r.String())
		}
	}
	v := verdictOf(Diagnostics(compiler.Verify(p, sm, o.Sizes, o.DTypes)), runs)
	if v.OK {
		v.checkConsistency(p, o.RequireConsistent)
	}
	return v
}

// checkConsistency fills the consistency fields of a proven plan's
// verdict, refusing it when require is set and it is not consistent (or
// could not be checked), as msccl-compile compile does.
func (v *Verdict) checkConsistency(p *Plan, require bool) {
	if !require && len(p.GPUs) > compiler.ConsistencyMaxRanks {
		v.ConsistencyLine = fmt.Sprintf("rank consistency not checked above %d ranks (requiring a consistent plan checks it)", compiler.ConsistencyMaxRanks)
		return
	}
	key, err := planKey(p)
	var c *Consistency
	if err == nil {
		c, err = consistencyOf(p, key, require)
	}
	switch {
	case err != nil && require:
		v.ConsistencyLine = "cannot check rank consistency: " + err.Error()
		v.OK, v.Verdict, v.Inconsistent = false, VerdictInconsistent, v.ConsistencyLine
	case err != nil:
		v.ConsistencyLine = "rank consistency unknown: " + err.Error()
	default:
		v.Consistency, v.ConsistencyLine = c, c.String()
		if cerr := c.Err(); cerr != nil && require {
			v.OK, v.Verdict, v.Inconsistent = false, VerdictInconsistent, cerr.Error()
		}
	}
}

// SimOptions are one CPU run's (SimulatePlan).
type SimOptions struct {
	Size     int64
	DType    DType
	Op       ReduceOp
	Launches int  // 0: ProofLaunches
	LLWidth  int  // 8 or 16; 0: 16
	Symbolic bool // byte ranges instead of values: memory independent of Size
	// MemoryPercent caps the run at this share of the host's available
	// memory, checked before anything is allocated (0: 75).
	MemoryPercent int64
}

// SimulatePlan runs p once on the CPU executor, as msccl-compile sim
// does, refusing before it allocates a run that would not fit the
// memory cap. An error is a run that could not be set up (a size outside
// the rule, too much memory); a wrong plan is a failing Verdict.
func SimulatePlan(p *Plan, sm *SourceMap, o SimOptions) (*Verdict, error) {
	if o.Launches == 0 {
		o.Launches = ProofLaunches
	}
	if o.LLWidth == 0 {
		o.LLWidth = 16
	}
	if o.MemoryPercent == 0 {
		o.MemoryPercent = 75
	}
	budget, err := hostmem.NewBudget(o.MemoryPercent)
	if err != nil {
		return nil, err
	}
	if need, err := cpu.BufferMemory(p, o.Size, o.Launches, false); err == nil && !o.Symbolic {
		if err := budget.Check(fmt.Sprintf("plan %q at %s", p.Name, size.Format(o.Size)), need); err != nil {
			return nil, err
		}
	}
	rep, err := cpu.Run(p, cpu.Options{Size: o.Size, DType: o.DType, Reduce: o.Op, Launches: o.Launches, LLWidth: o.LLWidth, Symbolic: o.Symbolic, MaxMemory: budget.Bytes})
	if err != nil {
		return nil, err
	}
	run := fmt.Sprintf("%d bytes, %s", o.Size, o.DType)
	if o.Symbolic {
		run = fmt.Sprintf("%d bytes, symbolic", o.Size)
	}
	v := verdictOf(Diagnostics(compiler.RunDiagnostics(rep, sm, run)), []string{run})
	v.OK, v.Verdict, v.Steps = rep.OK(), rep.Verdict.String(), rep.Steps
	return v, nil
}
