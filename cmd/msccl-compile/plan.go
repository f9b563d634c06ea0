package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/hostmem"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
)

func init() {
	register("check", "decode and validate a plan; exit 0 if valid", cmdCheck)
	register("dump", "print a plan as readable text", cmdDump)
}

// loadPlan reads, decodes and validates a plan file of at most maxBytes,
// printing every diagnostic (in format f) at the file. It returns nil when
// the plan has errors or is refused for its size.
func loadPlan(cmd, path string, stderr io.Writer, f diag.Format, maxBytes int64) *ir.Plan {
	if maxBytes == ir.DefaultMaxPlanBytes {
		// Unless the cap was chosen, decoding must also fit the host's
		// memory budget (that of sim, which also heeds ulimit -v).
		if b, err := hostmem.NewBudget(simMemoryPercent); err == nil && b.Bytes/ir.DecodeBytesPerByte < maxBytes {
			maxBytes = max(1, b.Bytes/ir.DecodeBytesPerByte)
		}
	}
	data, err := ir.ReadPlanFile(path, maxBytes)
	var tl *ir.PlanTooLargeError
	// File errors name the command, like every other refusal, so a script
	// running several tools shows which one could not read what.
	if errors.As(err, &tl) {
		errorf(stderr, cmd, "%v; raise the cap with --max-plan-size SIZE", err)
		return nil
	}
	if err != nil {
		errorf(stderr, cmd, "%v", err)
		return nil
	}
	if h := scheduleHint(path, data); h != nil {
		printDiags(stderr, h, f)
		return nil
	}
	p, ds, err := ir.LoadLimit(data, maxBytes)
	for i := range ds {
		ds[i].Subject.Start.Filename = path
	}
	printDiags(stderr, ds, f)
	if err != nil {
		return nil
	}
	return p
}

// planSizeFlag registers --max-plan-size, the cap loadPlan reads plans
// under: decoding needs about ir.DecodeBytesPerByte times the file in
// memory, so a plan far above the cap is refused before it is read. Left
// at its default, the cap also shrinks to the host's memory budget.
func planSizeFlag(fs *flagSet) *int64 {
	n := new(int64)
	*n = ir.DefaultMaxPlanBytes
	fs.Func("max-plan-size", fmt.Sprintf("refuse plan files larger than this before decoding them (default %s, or less where the memory budget is smaller; decoding needs about %d times the file in memory)",
		size.Format(ir.DefaultMaxPlanBytes), ir.DecodeBytesPerByte), func(s string) error {
		v, err := size.Parse(s)
		if err != nil {
			return err
		}
		if v <= 0 {
			return fmt.Errorf("want a positive size, got %q", s)
		}
		*n = v
		return nil
	})
	return n
}

// planFlags parses the flags of check and dump: diagnostics as JSON and
// the plan-size cap, then one plan file. When ok is false the command is
// over and code is its exit status (0 after -h).
func planFlags(cmd string, args []string, stderr io.Writer) (path string, df diag.Format, maxBytes int64, code int, ok bool) {
	fs := newFlags(cmd, stderr, cmd+" [--json] [--max-plan-size SIZE] PLAN.json")
	f := jsonFlag(fs)
	mb := planSizeFlag(fs)
	pos, code, ok := fs.parse(args)
	if !ok {
		return "", 0, 0, code, false
	}
	if len(pos) != 1 {
		return "", 0, 0, fs.usageError("want one PLAN.json, got %s", arguments(pos)), false
	}
	return pos[0], *f, *mb, 0, true
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	path, f, maxBytes, code, ok := planFlags("check", args, stderr)
	if !ok {
		return code
	}
	p := loadPlan("check", path, stderr, f, maxBytes)
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
	path, f, maxBytes, code, ok := planFlags("dump", args, stderr)
	if !ok {
		return code
	}
	p := loadPlan("dump", path, stderr, f, maxBytes)
	if p == nil {
		return exitBad
	}
	io.WriteString(stdout, ir.Dump(p))
	return exitOK
}
