package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/hostmem"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
)

func init() {
	register("sim", "run a plan on the CPU executor and print its verdict", cmdSim)
}

type simFlags struct {
	size     string
	dtype    string
	op       string
	launches int
	llWidth  int
	trace    string
	topo     string
	json     bool
	symbolic bool
}

func (f *simFlags) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&f.size, "size", "1MiB", "message size as nccl-tests counts it (allgather: output bytes; others: input bytes); suffixes K/KiB/M/MiB/G/GiB")
	fs.StringVar(&f.dtype, "dtype", "f32", "data type: f32, f16, bf16, i32, u32, u8, f8e4m3, f8e5m2")
	fs.StringVar(&f.op, "op", "", "reduction: sum, min, max, prod (default: the plan's own, sum unless its reduce_op fixes one; another one than that is refused)")
	fs.IntVar(&f.launches, "launches", compiler.ProofLaunches, "back-to-back launches to run and check (stale packets, scratch reuse; the default is what a proof runs)")
	fs.IntVar(&f.llWidth, "ll", 16, "LL packet width in bytes: 8 or 16")
	fs.StringVar(&f.trace, "trace", "", "write a Chrome trace-event JSON of the first launch to this file (open in Perfetto)")
	fs.StringVar(&f.topo, "topology", "", "YAML topology file for the trace's cost model (default: H200 NVLink)")
	fs.BoolVar(&f.json, "json", false, "print the verdict as JSON (and diagnostics as JSON lines on stderr)")
	fs.BoolVar(&f.symbolic, "symbolic", false, "prove symbolically: every element a fingerprint of whose input it is, scratch poison, reductions add (covers every reduction and type; --dtype and --op are ignored, but for refusing a reduction the plan does not serve)")
}

// options turns flags into executor options, or an error naming the flag.
func (f *simFlags) options() (cpu.Options, error) {
	var o cpu.Options
	n, err := size.Parse(f.size)
	if err != nil {
		return o, fmt.Errorf("--size: %w", err)
	}
	dt, err := cpu.ParseDType(f.dtype)
	if err != nil {
		return o, fmt.Errorf("--dtype: %w", err)
	}
	op := ir.ReduceOp(f.op)
	switch op {
	case ir.ReduceNone, ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd:
	default:
		return o, fmt.Errorf("--op: unknown reduction %q (want sum, min, max or prod)", f.op)
	}
	if f.launches < 1 {
		return o, fmt.Errorf("--launches must be at least 1, got %d", f.launches)
	}
	if f.llWidth != 8 && f.llWidth != 16 {
		return o, fmt.Errorf("--ll must be 8 or 16, got %d", f.llWidth)
	}
	o = cpu.Options{Size: n, DType: dt, Reduce: op, Launches: f.launches, LLWidth: f.llWidth, Trace: f.trace != "", Symbolic: f.symbolic}
	if f.topo != "" {
		t, err := cpu.LoadTopology(f.topo)
		if err != nil {
			return o, fmt.Errorf("--topology: %w", err)
		}
		o.Topology = t
	}
	return o, nil
}

func cmdSim(args []string, stdout, stderr io.Writer) int {
	var f simFlags
	fs := newFlags("sim", stderr, "sim PLAN.json [--size 1MiB] [--dtype f16] [--op sum] [--launches 2] [--trace out.json] [--json]")
	f.register(fs)
	maxPlan := planSizeFlag(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError("want one PLAN.json, got %s", arguments(pos))
	}
	opt, err := f.options()
	if err != nil {
		return errorf(stderr, "sim", "%v", err)
	}
	df := diag.Text
	if f.json {
		df = diag.JSON
	}
	p := loadPlan("sim", pos[0], stderr, df, *maxPlan)
	if p == nil {
		return exitBad
	}
	// Refuse before allocating, against this host's memory: the kernel
	// would otherwise kill the process part way through a large run.
	budget, err := hostmem.NewBudget(simMemoryPercent)
	if err != nil {
		return errorf(stderr, "sim", "%v", err)
	}
	// An error here (a size the plan cannot split) is the executor's to
	// report, in its own words. A symbolic run holds byte ranges, not
	// bytes: its memory does not grow with the size.
	if need, err := cpu.BufferMemory(p, opt.Size, opt.Launches, false); err == nil && !opt.Symbolic {
		if err := budget.Check(fmt.Sprintf("%s at %s", pos[0], size.Format(opt.Size)), need); err != nil {
			return errorf(stderr, "sim", "%v", err)
		}
	}
	opt.MaxMemory = budget.Bytes
	return simulate(pos[0], p, opt, &f, stdout, stderr, nil)
}

// simMemoryPercent is the share of the host's available memory one
// simulation may use: the rest covers the Go heap's headroom (msccl-compile
// runs with GOGC=400, gc.go) and the plan itself.
const simMemoryPercent = 75

// simulate runs the executor and prints the verdict. where, when not nil,
// rewrites a finding's place (the compile command maps it to DSL lines).
func simulate(name string, p *ir.Plan, opt cpu.Options, f *simFlags, stdout, stderr io.Writer, where func(cpu.Place) string) int {
	if red, err := p.RunReduce(opt.Reduce); err == nil {
		opt.Reduce = red // the plan's own when --op was not given
	}
	// A reduction the plan does not serve is the executor's refusal
	// (exec.options), in its words.
	prog := newProgress(stderr)
	prog.step(fmt.Sprintf("sim: %s at %s, %d launches", name, size.Format(opt.Size), opt.Launches))
	rep, err := cpu.Run(p, opt)
	prog.end()
	if err != nil && f.json {
		// The run's refusal as a diagnostic line like the plan's own, its
		// code saying what to change (exec.size, exec.options, ...).
		printDiags(stderr, diag.FromError(fmt.Errorf("%s: %w", name, err), diag.CodeCannotRun), diag.JSON)
		return exitBad
	}
	if err != nil {
		return errorf(stderr, "sim", "%s: %v", name, err)
	}
	if f.trace != "" {
		if err := os.WriteFile(f.trace, rep.Trace, 0o644); err != nil {
			return errorf(stderr, "sim", "writing trace: %v", err)
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(toJSONVerdict(name, opt, rep, where))
	} else {
		what := fmt.Sprintf("%s, %s", opt.DType, opt.Reduce)
		if opt.Symbolic {
			what = "symbolic (" + servedReductions(p) + ")"
		}
		fmt.Fprintf(stdout, "%s: %s at %d bytes, %s, %d launches\n", name, rep.Verdict, opt.Size, what, opt.Launches)
		if !rep.OK() {
			if where != nil || opt.Symbolic {
				if where == nil {
					where = func(cpu.Place) string { return "" }
				}
				printFindings(stdout, rep, where)
			} else {
				fmt.Fprint(stdout, rep.String())
			}
		}
	}
	if !rep.OK() {
		return exitBad
	}
	return exitOK
}

// servedReductions says which reductions and types a proof of p covers:
// every one, or only the reduction its reduce_op fixes (ir.Plan.FixedReduce).
func servedReductions(p *ir.Plan) string {
	if fixed, err := p.FixedReduce(); err != nil || fixed != ir.ReduceNone {
		return p.Reductions() + ", every type"
	}
	return "every reduction and type"
}

// printFindings prints the report with each place followed by where it
// came from (the DSL source position for compiled programs).
// maxPrinted caps the findings printed; --json has them all.
const maxPrinted = 8

func printFindings(w io.Writer, rep *cpu.Report, where func(cpu.Place) string) {
	at := func(p cpu.Place) string {
		if s := where(p); s != "" {
			return s + ": " + p.String()
		}
		return p.String()
	}
	fmt.Fprintf(w, "verdict: %s\n", rep.Verdict)
	for _, s := range rep.Deadlocks {
		fmt.Fprintf(w, "deadlock: %s waits for %s\n", at(s.Place), s.Waiting)
	}
	for _, r := range rep.Races {
		fmt.Fprintf(w, "race: %s and %s on rank %d %s[%d:%d]\n", at(r.A.Place), at(r.B.Place), r.A.BufferRank, r.A.Buffer.Long(), max(r.A.Off, r.B.Off), min(r.A.End, r.B.End))
	}
	for _, u := range rep.Unbalanced {
		fmt.Fprintf(w, "unbalanced: %s: %d signal(s) on %s never waited for\n", at(u.Place), u.Count, u.Channel)
	}
	// Findings say in words what the per-element values only show; a
	// symbolic run's values are fingerprints, meaningless to a reader.
	if len(rep.Findings) == 0 {
		for _, m := range rep.Wrong {
			fmt.Fprintf(w, "wrong result: launch %d rank %d output[%d]: got %s, want %s\n", m.Launch, m.Rank, m.Off, m.Got, m.Want)
		}
		if rep.WrongTotal > len(rep.Wrong) {
			fmt.Fprintf(w, "wrong result: %d more wrong elements\n", rep.WrongTotal-len(rep.Wrong))
		}
	} else {
		fmt.Fprintf(w, "wrong result: %d wrong elements\n", rep.WrongTotal)
	}
	for i, f := range rep.Findings {
		if i == maxPrinted {
			fmt.Fprintf(w, "finding: %d more\n", len(rep.Findings)-i)
			break
		}
		by := "no op wrote it"
		if f.Writer != nil {
			by = "last written by " + at(*f.Writer)
		}
		fmt.Fprintf(w, "finding: launch %d rank %d output[%d:%d] (%d elements, %s): %s\n", f.Launch, f.Rank, f.Off, f.End, f.Elems, by, f.Explain)
	}
	for _, c := range rep.Clobbered {
		by := "?"
		if c.Writer != nil {
			by = at(*c.Writer)
		}
		fmt.Fprintf(w, "input clobbered: launch %d rank %d input[%d:%d] overwritten by %s\n", c.Launch, c.Rank, c.Off, c.End, by)
	}
}
