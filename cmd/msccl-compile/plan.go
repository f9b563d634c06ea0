package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

func init() {
	register("check", "decode and validate a plan; exit 0 if valid", cmdCheck)
	register("dump", "print a plan as readable text", cmdDump)
}

// loadPlan reads, decodes and validates a plan file, printing every
// diagnostic (in format f) at the file. It returns nil when the plan has
// errors.
func loadPlan(path string, stderr io.Writer, f diag.Format) *ir.Plan {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return nil
	}
	p, ds, err := ir.Load(data)
	for i := range ds {
		ds[i].Subject.Start.Filename = path
	}
	printDiags(stderr, ds, f)
	if err != nil {
		return nil
	}
	return p
}

// onePath reads a command's only argument, a plan file; when ok is false
// the command is over and code is its exit status (0 after -h).
func onePath(cmd string, args []string, stderr io.Writer) (path string, code int, ok bool) {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintf(stderr, "usage: msccl-compile %s PLAN.json\n", cmd)
		return "", exitOK, false
	}
	if len(args) != 1 || len(args[0]) == 0 || args[0][0] == '-' {
		fmt.Fprintf(stderr, "msccl-compile %s: want one PLAN.json, got %q (usage: msccl-compile %s PLAN.json)\n", cmd, args, cmd)
		return "", exitUsage, false
	}
	return args[0], 0, true
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	// --json is check's one flag; onePath takes the plan.
	f := diag.Text
	if i := slices.IndexFunc(args, func(a string) bool { return a == "--json" || a == "-json" }); i >= 0 {
		f, args = diag.JSON, slices.Delete(slices.Clone(args), i, i+1)
	}
	path, code, ok := onePath("check", args, stderr)
	if !ok {
		return code
	}
	p := loadPlan(path, stderr, f)
	if p == nil {
		return exitBad
	}
	nops := 0
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			nops += len(tb.Ops)
		}
	}
	fmt.Fprintf(stdout, "%s: valid %s plan %q: %d ranks, protocol %s, %d ops\n", path, p.Collective, p.Name, len(p.GPUs), p.Protocol, nops)
	return exitOK
}

func cmdDump(args []string, stdout, stderr io.Writer) int {
	path, code, ok := onePath("dump", args, stderr)
	if !ok {
		return code
	}
	p := loadPlan(path, stderr, diag.Text)
	if p == nil {
		return exitBad
	}
	io.WriteString(stdout, ir.Dump(p))
	return exitOK
}
