package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/hostmem"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
)

func init() {
	register("compile", "compile a schedule program to a plan and prove it correct on the CPU", cmdCompile)
	register("fmt", "print schedule programs in canonical form (-w rewrites them)", cmdFmt)
}

func cmdCompile(args []string, stdout, stderr io.Writer) int {
	defs := defines{}
	fs := newFlags("compile", stderr, "compile FILE.msccl [-D name=value ...] [-o plan.json] [--dump=PASS|all] [--no-verify] [--verify-sizes SIZES] [--verify-dtypes f32,bf16] [--require-consistent] [--json]")
	fs.Var(defs, "D", "override a parameter: -D ranks=16 (repeatable)")
	out := fs.String("o", "", "write the plan here instead of stdout")
	dump := fs.String("dump", "", "print the IR after this pass to stderr (passes: "+strings.Join(compiler.PassNames(), ", ")+"; or all)")
	noVerify := fs.Bool("no-verify", false, "skip the CPU executor's proof of the compiled plan")
	sizes := fs.String("verify-sizes", "", "message sizes (nccl-tests convention) the proof runs at (default: sizes that cover every size the plan's rule admits)")
	dtypes := fs.String("verify-dtypes", "f32,bf16", "data types the proof runs with")
	proofMem := fs.String("proof-memory", "", "memory the proof may use, e.g. 8GiB (default: 75% of available memory, or $MSCCL_HOST_MEMORY); a proof estimated past it is refused before it runs")
	requireCons := fs.Bool("require-consistent", false, "refuse a plan whose ranks may receive different bits for one result (reduced in different orders, or by the switch)")
	df := jsonFlag(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError("want one FILE.msccl, got %s", arguments(pos))
	}
	if *out == "-" {
		// The Unix convention: "-o -" is standard output, not a file
		// named "-" (one such file was committed by accident).
		*out = ""
	}
	var vs []int64
	var vt []cpu.DType
	maxMem, err := proofMemory(*proofMem)
	if err != nil {
		return errorf(stderr, "compile", "--proof-memory: %v", err)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok && !*noVerify {
		// The collector runs at GOGC=400 for the compile and 50 for
		// the proof (gc.go), which lets the heap grow to five and 1.5
		// times what is live: near the cap it must collect instead (a
		// 256-rank proof peaked at 7 GB for 3 GB live).
		debug.SetMemoryLimit(maxMem)
	}
	if !*noVerify {
		for _, s := range strings.Split(*sizes, ",") {
			if *sizes == "" {
				break
			}
			n, err := size.Parse(s)
			if err != nil {
				return errorf(stderr, "compile", "--verify-sizes: %v", err)
			}
			vs = append(vs, n)
		}
		for _, s := range strings.Split(*dtypes, ",") {
			dt, err := cpu.ParseDType(strings.TrimSpace(s))
			if err != nil {
				return errorf(stderr, "compile", "--verify-dtypes: %v", err)
			}
			vt = append(vt, dt)
		}
	}
	src, err := os.ReadFile(pos[0])
	if err != nil {
		return errorf(stderr, "compile", "%v", err)
	}
	if h := planHint(pos[0], src); h != nil {
		printDiags(stderr, h, *df)
		return exitBad
	}
	opts := compiler.Options{DumpAfter: *dump, Dump: func(pass, text string) {
		fmt.Fprintf(stderr, "# after pass %s\n%s", pass, text)
	}}
	p, sm, ds := compiler.CompileSource(pos[0], src, defs, opts)
	printDiags(stderr, ds, *df)
	if p == nil || ds.HasErrors() {
		return exitBad
	}
	if !*noVerify {
		proofGC()
		vds := compiler.VerifyWith(p, sm, compiler.VerifyOptions{Sizes: vs, DTypes: vt, MaxMemory: maxMem})
		printDiags(stderr, vds, *df)
		if vds.HasErrors() {
			what := "the compiled plan is not correct"
			if compiler.VerdictOf(vds) == compiler.KindError {
				// Only runs that could not start: nothing is known wrong.
				what = "the proof could not run, so the compiled plan is not proven"
			}
			fmt.Fprintf(stderr, "%s: %s (see above); no plan written. Use --no-verify to write it anyway.\n", pos[0], what)
			return exitBad
		}
	}
	consLine, code := consistencyLine(p, !*noVerify, *requireCons)
	if code != exitOK {
		fmt.Fprintf(stderr, "%s: %s; no plan written (drop --require-consistent to write it anyway)\n", pos[0], consLine)
		return code
	}
	// Streamed: a 1024-rank plan is about 1 GB of JSON.
	dst, closeOut := stdout, func() error { return nil }
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return errorf(stderr, "compile", "%v", err)
		}
		dst, closeOut = f, f.Close
	}
	// 64 KiB: EncodeTo hands over whole ranks, which pass a buffer this
	// size straight through once they are larger; a larger one would only
	// add pages a small compile touches for the first time.
	bw := bufio.NewWriterSize(dst, 64<<10)
	err = ir.EncodeTo(bw, p)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	if err != nil {
		if *out != "" {
			os.Remove(*out) // no half-written plan left behind
		}
		return errorf(stderr, "compile", "writing plan: %v", err)
	}
	if !*noVerify {
		fmt.Fprintf(stderr, "%s: wrote %s (%d ranks); %s\n", pos[0], outName(*out), len(p.GPUs), provenSummary(p, vs, vt))
	}
	if consLine != "" {
		fmt.Fprintf(stderr, "%s: %s\n", pos[0], consLine)
	}
	return exitOK
}

// consistencyLine is what compile prints about rank consistency, and
// exitBad when require is set and the plan is not consistent. A plan
// that was not verified is checked only when required.
func consistencyLine(p *ir.Plan, verified, require bool) (string, int) {
	if !require && (!verified || len(p.GPUs) > compiler.ConsistencyMaxRanks) {
		if verified {
			return fmt.Sprintf("rank consistency not checked above %d ranks (--require-consistent checks it)", compiler.ConsistencyMaxRanks), exitOK
		}
		return "", exitOK
	}
	c, err := compiler.Consistency(p)
	switch {
	case err != nil && require:
		return "cannot check rank consistency: " + err.Error(), exitBad
	case err != nil:
		return "rank consistency unknown: " + err.Error(), exitOK
	case require && c.Err() != nil:
		return c.Err().Error(), exitBad
	}
	return c.String(), exitOK
}

func cmdFmt(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fmt", stderr, "fmt [-w] [-l] [--json] FILE.msccl...")
	write := fs.Bool("w", false, "rewrite files in place")
	list := fs.Bool("l", false, "list files whose formatting differs")
	df := jsonFlag(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return fs.usageError("want FILE.msccl arguments")
	}
	rc := exitOK
	for _, path := range pos {
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			rc = exitBad
			continue
		}
		ds := planHint(path, src)
		var f *dsl.File
		if ds == nil {
			f, ds = dsl.Parse(path, src)
		}
		printDiags(stderr, ds, *df)
		if ds.HasErrors() {
			rc = exitBad
			continue
		}
		out := dsl.Format(f)
		switch {
		case *list:
			if !bytes.Equal(src, out) {
				fmt.Fprintln(stdout, path)
			}
		case *write:
			if !bytes.Equal(src, out) {
				if err := os.WriteFile(path, out, 0o644); err != nil {
					fmt.Fprintln(stderr, err)
					rc = exitBad
				}
			}
		default:
			stdout.Write(out)
		}
	}
	return rc
}

// proofMemory is the proof's memory cap: --proof-memory when given, else
// the share of available memory sim allows itself (hostmem.NewBudget,
// which reads $MSCCL_HOST_MEMORY first).
func proofMemory(flag string) (int64, error) {
	if flag == "" {
		b, err := hostmem.NewBudget(simMemoryPercent)
		return b.Bytes, err
	}
	n, err := size.Parse(flag)
	if err == nil && n <= 0 {
		err = fmt.Errorf("want a positive size, got %q", flag)
	}
	return n, err
}

func outName(o string) string {
	if o == "" {
		return "the plan to stdout"
	}
	return o
}

// provenSummary says what the proof covered: the plan's whole size rule
// when it ran at the rule's proof sizes, else the sizes asked for; and
// which runs it made (compiler.ProofRuns, the list Verify ran).
func provenSummary(p *ir.Plan, sizes []int64, dtypes []cpu.DType) string {
	rule, err := p.SizeRule()
	if err != nil {
		return "not proven: " + err.Error()
	}
	runs, err := compiler.ProofRuns(p, sizes, dtypes)
	if err != nil {
		return "not proven: " + err.Error()
	}
	var sym []int64
	var byteLevel []string
	for _, r := range runs {
		if r.Symbolic {
			sym = append(sym, r.Size)
		} else {
			byteLevel = append(byteLevel, fmt.Sprintf("%s at %d", r.DType, r.Size))
		}
	}
	how := fmt.Sprintf("symbolic at %s bytes, %d launches; byte level %s", joinInts(sym), compiler.ProofLaunches, strings.Join(byteLevel, ", "))
	if sizes == nil {
		return fmt.Sprintf("proven correct for every message size in its rule, %s, %s (%s)", rule, servedReductions(p), how)
	}
	return fmt.Sprintf("proven correct at %s bytes only (%s); its size rule: %s", joinInts(sizes), how, rule)
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
