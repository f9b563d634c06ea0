package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

func init() {
	register("plans", "compile every selection-table row that fits a world size into a plan directory", cmdPlans)
}

func cmdPlans(args []string, stdout, stderr io.Writer) int {
	defs := defines{}
	fs := newFlags("plans", stderr, "plans [--select FILE.yaml] -D ranks=8 [-D gpus_per_node=8] --out DIR [--no-verify] [--json]")
	fs.Var(defs, "D", "world description and parameter overrides: -D ranks=8 (required), -D gpus_per_node=4 or -D nodes=2")
	sel := fs.String("select", "", "selection table `FILE.yaml` (its algorithm files next to it); default: the library built into this binary")
	out := fs.String("out", "", "directory for the plans (created if missing)")
	noVerify := fs.Bool("no-verify", false, "skip the CPU executor's proof of each plan")
	df := jsonFlag(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return fs.usageError("want no arguments, got %q", pos)
	}
	if *out == "" {
		return fs.usageError("--out DIR is required")
	}
	// The built-in library (package algorithms embeds the programs and the
	// table), so an installed msccl-compile works from any directory; a
	// table on disk is for people tuning their own.
	var plans []compiler.NamedPlan
	var err error
	table := *sel
	if table == "" {
		table = "algorithms/" + algorithms.Selection + " (built in)"
		plans, err = algorithms.Plans(defs)
	} else {
		plans, err = compiler.Plans(*sel, defs)
	}
	if err != nil {
		return errorf(stderr, "plans", "%v", err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return errorf(stderr, "plans", "%v", err)
	}
	for i, np := range plans {
		if !*noVerify {
			prog := newProgress(stderr)
			prog.step(fmt.Sprintf("plans: proving %s (%d/%d)", np.Name, i+1, len(plans)))
			vds := compiler.Verify(np.Plan, np.Source, nil, []cpu.DType{cpu.F32, cpu.BF16})
			prog.end()
			printDiags(stderr, vds, *df)
			if vds.HasErrors() {
				return errorf(stderr, "plans", "%s (row at %s:%d) is not correct; no plan written", np.Algorithm, table, np.Row.Line)
			}
		}
		data, err := ir.Encode(np.Plan)
		if err != nil {
			return errorf(stderr, "plans", "encoding %s: %v", np.Name, err)
		}
		path := filepath.Join(*out, np.Name+".json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return errorf(stderr, "plans", "%v", err)
		}
		fmt.Fprintf(stdout, "%s\t%s\t[%s, %s]\t%s\n", path, np.Plan.Collective, np.Row.MinSize, np.Row.MaxSize, strings.TrimSuffix(filepath.Base(np.Algorithm), ".msccl"))
	}
	return exitOK
}
