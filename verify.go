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
}

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
	runs := []string{}
	if rs, err := compiler.ProofRuns(p, sizes, dtypes); err == nil {
		for _, r := range rs {
			runs = append(runs, r.String())
		}
	}
	return verdictOf(Diagnostics(compiler.Verify(p, sm, sizes, dtypes)), runs)
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
