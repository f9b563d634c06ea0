package compiler

import (
	"fmt"
	"reflect"
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
	// Check runs the hand-off check after every pass (handoffCheck) and
	// ir.Validate after every pass that returns a plan, and reports
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
	var v any = f
	placed := false
	for _, ps := range passes {
		t0 := time.Now()
		st.code = diag.CompilePass(ps.name)
		v = ps.run(st, v)
		if opts.Timing != nil {
			opts.Timing(ps.name, time.Since(t0))
		}
		if st.diags.HasErrors() {
			st.diags.Sort()
			return nil, nil, st.diags
		}
		placed = placed || ps.name == placerPass
		b, _ := v.(*built)
		if opts.Check {
			if msg := handoffCheck(ps, placed, v); msg != "" {
				st.diags = append(st.diags, diag.Diagnostic{Code: diag.CodeInternal,
					Summary: fmt.Sprintf("internal compiler error after pass %s: %s", ps.name, msg),
					Subject: diag.Range{Start: diag.Pos{Filename: f.Filename}}})
				return nil, nil, st.diags
			}
		}
		if opts.Check && b != nil {
			for _, d := range ir.Validate(b.plan).Errors() {
				if ps.name != passes[len(passes)-1].name && (d.IsLimit() || d.Code == ir.CodeUnsignaledWait) {
					// Limits hold for the finished plan; fuse-sync is what
					// brings op and channel counts down. An unpaired wait
					// is the program's error, which the last pass reports
					// at its statement.
					continue
				}
				st.diags = append(st.diags, diag.Diagnostic{Code: diag.CodeInternal,
					Summary: fmt.Sprintf("internal compiler error after pass %s: %s", ps.name, d.String()),
					Subject: b.sm.rangeOfPath(d.Path, f.Filename)})
			}
			if st.diags.HasErrors() {
				return nil, nil, st.diags
			}
		}
		if opts.Dump != nil && (opts.DumpAfter == ps.name || opts.DumpAfter == "all") {
			opts.Dump(ps.name, dump(v))
		}
	}
	b, _ := v.(*built)
	if b == nil {
		st.diags.Sort()
		return nil, nil, st.diags
	}
	recordSizeRule(st, b)
	if st.diags.HasErrors() {
		st.diags.Sort()
		return nil, nil, st.diags
	}
	st.diags.Sort()
	return b.plan, b.sm, st.diags
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

// dump renders what a pass returned: the plan once there is one, the
// action list (or the evaluated ops) before.
func dump(v any) string {
	switch v := v.(type) {
	case *built:
		return ir.Dump(v.plan)
	case *program:
		return dumpActions(&v.hdr, v.actions, nil)
	case *evaluated:
		return dumpActions(&v.hdr, nil, v.ops)
	}
	return ""
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

// placerPass is the pass that puts the program's actions in blocks; the
// passes after it hand on a program whose blocks are set.
const placerPass = "assign-tbs"

// handoffCheck says what is wrong with what a pass returned, "" when
// nothing. Its type is the pass's own (step, rewrite); what the type does
// not say is checked here: something was returned, the program is in
// blocks exactly from placerPass on (placed), a plan comes with its
// source map, and only a channel-level program's actions go on with the
// plan (limits' balance check reads them; a chunk-level program's
// millions of actions must not be kept alive). Under Options.Check,
// beside ir.Validate.
func handoffCheck(ps pass, placed bool, v any) string {
	if v == nil || reflect.ValueOf(v).IsNil() {
		return fmt.Sprintf("%s returned no %v", ps.name, ps.out)
	}
	switch v := v.(type) {
	case *program:
		if (v.blocks != nil) != placed {
			if placed {
				return ps.name + " returned actions not in blocks"
			}
			return ps.name + " returned actions in blocks before " + placerPass
		}
	case *built:
		if v.plan == nil || v.sm == nil {
			return ps.name + " returned no plan or no source map"
		}
		if !v.explicit && v.acts != nil {
			return ps.name + " handed on the actions of a chunk-level program with the plan"
		}
	}
	return ""
}
