package compiler

import (
	"fmt"
	"strings"
	"time"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Diagnostics are the toolchain's one diagnostic list (the same type as
// dsl.Diagnostics and ir.Diagnostics): every compiler message is
// positioned in the source and carries a stable code (CodeOf).
type Diagnostics = dsl.Diagnostics

// Options control a compilation.
type Options struct {
	// DumpAfter names a pass (see PassNames) whose result is written to
	// Dump; "all" dumps after every pass.
	DumpAfter string
	// Dump receives the dumps; nil means they are dropped.
	Dump func(pass, text string)
	// Check runs the form check after every pass (formCheck) and
	// ir.Validate after every pass that produces a plan, and reports
	// their errors as internal compiler errors.
	Check bool
	// MaxOps bounds the work of evaluation: ops produced and loop
	// iterations run (0 means 4M ops and 16M iterations). Fuzzing sets it
	// low so that one input cannot take seconds.
	MaxOps int
	// Timing, when set, receives each pass's wall time (and "check" for
	// the IR checker), for finding where compile time goes.
	Timing func(pass string, d time.Duration)
}

// pass is one named step of the pipeline.
type pass struct {
	name string
	doc  string
	// in and out are the forms the pass takes and returns (see form);
	// Check validates every plan a pass returns.
	in, out formKind
	run     func(*state, form) form
}

// PassNames lists the passes in order, for --dump.
func PassNames() []string {
	out := make([]string, len(passes))
	for i, p := range passes {
		out[i] = p.name
	}
	return out
}

// Compile compiles f with the given parameter overrides. The plan is nil
// when any error was reported.
func Compile(f *dsl.File, defines map[string]int64, opts Options) (p *ir.Plan, sm *SourceMap, ds Diagnostics) {
	if f == nil {
		return nil, nil, Diagnostics{{Code: diag.CodeNoProgram, Summary: "no program to compile"}}
	}
	if opts.DumpAfter != "" && opts.DumpAfter != "all" && !knownPass(opts.DumpAfter) {
		return nil, nil, Diagnostics{{Code: diag.CodeUnknownPass, Summary: fmt.Sprintf("unknown pass %q for --dump", opts.DumpAfter),
			Detail:  joinDetail(diag.Suggest(opts.DumpAfter, PassNames()), "passes: "+strings.Join(PassNames(), ", ")),
			Subject: dsl.Range{Start: dsl.Pos{Filename: f.Filename}}}}
	}
	defer func() {
		// A compiler bug must surface as a diagnostic, never as a crash of
		// the CLI or of a fuzz run.
		if r := recover(); r != nil {
			p, sm = nil, nil
			ds = append(ds, diag.Diagnostic{Code: diag.CodeInternal, Summary: fmt.Sprintf("internal compiler error: %v", r),
				Subject: dsl.Range{Start: dsl.Pos{Filename: f.Filename}}})
		}
	}()
	st := &state{file: f, defines: defines, opts: opts}
	var fm form
	for _, ps := range passes {
		t0 := time.Now()
		st.code = diag.CompilePass(ps.name)
		fm = ps.run(st, fm)
		if opts.Timing != nil {
			opts.Timing(ps.name, time.Since(t0))
		}
		if st.diags.HasErrors() {
			st.diags.Sort()
			return nil, nil, st.diags
		}
		if opts.Check {
			if msg := formCheck(ps, fm); msg != "" {
				st.diags = append(st.diags, diag.Diagnostic{Code: diag.CodeInternal,
					Summary: fmt.Sprintf("internal compiler error after pass %s: %s", ps.name, msg),
					Subject: diag.Range{Start: diag.Pos{Filename: f.Filename}}})
				return nil, nil, st.diags
			}
		}
		if ps.out == formPlan && opts.Check && fm.built != nil {
			for _, d := range ir.Validate(fm.built.plan).Errors() {
				if ps.name != passes[len(passes)-1].name && (d.IsLimit() || d.Code == ir.CodeUnsignaledWait) {
					// Limits hold for the finished plan; fuse-sync is what
					// brings op and channel counts down. An unpaired wait
					// is the program's error, which the last pass reports
					// at its statement.
					continue
				}
				st.diags = append(st.diags, diag.Diagnostic{Code: diag.CodeInternal,
					Summary: fmt.Sprintf("internal compiler error after pass %s: %s", ps.name, d.String()),
					Subject: fm.built.sm.rangeOfPath(d.Path, f.Filename)})
			}
			if st.diags.HasErrors() {
				return nil, nil, st.diags
			}
		}
		if opts.Dump != nil && (opts.DumpAfter == ps.name || opts.DumpAfter == "all") {
			opts.Dump(ps.name, dump(fm))
		}
	}
	if fm.built == nil {
		st.diags.Sort()
		return nil, nil, st.diags
	}
	recordSizeRule(st, fm.built)
	if st.diags.HasErrors() {
		st.diags.Sort()
		return nil, nil, st.diags
	}
	st.diags.Sort()
	return fm.built.plan, fm.built.sm, st.diags
}

// recordSizeRule writes the sizes the plan serves into it
// (size_granularity, and min_message_size when the program set none
// higher), so that a reader of the JSON, upstream's executor included,
// sees the rule every entry point here enforces.
func recordSizeRule(st *state, b *built) {
	rule, err := b.plan.SizeRule()
	if err != nil {
		st.diags = append(st.diags, diag.Diagnostic{Code: diag.CodeNoSize, Summary: "the plan serves no message size: " + err.Error(),
			Subject: b.sm.header()})
		return
	}
	b.plan.SizeGranularity = uint64(rule.Granularity)
	b.plan.MinMessageSize = max(b.plan.MinMessageSize, uint64(rule.Min))
}

func knownPass(name string) bool {
	for _, p := range passes {
		if p.name == name {
			return true
		}
	}
	return false
}

func joinDetail(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// dump renders the state after a pass: the plan once there is one, the
// action list before.
func dump(f form) string {
	if f.built != nil {
		return ir.Dump(f.built.plan)
	}
	return dumpActions(f)
}

// CompileSource parses and compiles in one step.
func CompileSource(filename string, src []byte, defines map[string]int64, opts Options) (*ir.Plan, *SourceMap, Diagnostics) {
	f, ds := dsl.Parse(filename, src)
	if ds.HasErrors() {
		return nil, nil, ds
	}
	p, sm, ds2 := Compile(f, defines, opts)
	return p, sm, append(ds, ds2...)
}

// formCheck says what is wrong with the form a pass returned, "" when
// nothing: the passes hand on one form at a time (evaluated ops, then
// actions, then actions in blocks, then the plan), each consuming the one
// before, so a form left behind is a pass that did not finish its
// hand-off, and a form of another kind than the table says breaks the
// next pass. Under Options.Check, beside ir.Validate.
func formCheck(ps pass, f form) string {
	n := 0
	for _, set := range []bool{f.ev != nil, f.prog != nil, f.built != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Sprintf("%s returned %d forms, want one %v", ps.name, n, ps.out)
	}
	var got formKind
	switch {
	case f.ev != nil:
		got = formEvaluated
	case f.prog != nil && f.prog.blocks == nil:
		got = formActions
	case f.prog != nil:
		got = formBlocks
	default:
		got = formPlan
		b := f.built
		if b.plan == nil || b.sm == nil {
			return ps.name + " returned no plan or no source map"
		}
		// Only a channel-level program keeps its actions (for the balance
		// check).
		if !b.explicit && b.acts != nil {
			return ps.name + " handed on the actions of a chunk-level program with the plan"
		}
	}
	if got != ps.out {
		return fmt.Sprintf("%s returned %v, want %v", ps.name, got, ps.out)
	}
	return ""
}
