package compiler

import "fmt"

// passes is the pipeline, in order. Each lives in its own pass_*.go file
// and is a function of the form it takes (in) to the form it returns
// (out), each pass's in the one before's out (TestPassChain); run adapts
// it to the table. What every pass may touch besides its form is the
// state (state.go): the program, options and diagnostics.
var passes = []pass{
	{name: "evaluate", in: formFile, out: formEvaluated,
		doc: "run params, let, for and if; check names, ranks and chunk ranges",
		run: func(st *state, _ form) form { return form{ev: evaluate(st)} }},
	{name: "lower", in: formEvaluated, out: formActions,
		doc: "turn chunk moves into plan ops and pick channel types",
		run: func(st *state, f form) form { return form{prog: lower(st, f.ev)} }},
	{name: "assign-tbs", in: formActions, out: formBlocks,
		doc: "place every op on a thread block of its rank",
		run: func(st *state, f form) form { assignTBs(st, f.prog); return f }},
	{name: "instances", in: formBlocks, out: formBlocks,
		doc: "replicate blocks and split chunks for option instances",
		run: func(st *state, f form) form { replicate(st, f.prog); return f }},
	{name: "fuse", in: formBlocks, out: formBlocks,
		doc: "merge reduce chains, reduce+send (res, rres, respkt, recpkt, recspkt) and multi-peer puts",
		run: func(_ *state, f form) form { fuse(f.prog); return f }},
	// Sync and channel building are one pass: sync's result is no form of
	// its own (a dump after it showed fuse's actions unchanged), only what
	// channel building reads, and for chunk-level programs sync lays each
	// block out while the plan is written.
	{name: "sync", in: formBlocks, out: formPlan,
		doc: "insert nop, signal/wait, semaphores and flushes from data dependencies; allocate and pair channels, remote buffers, semaphores; build the plan",
		run: func(st *state, f form) form { return form{built: syncAndBuild(st, f.prog)} }},
	{name: "fuse-sync", in: formPlan, out: formPlan,
		doc: "merge multi-channel signal/wait, put+signal(+flush) into pws/pwsf, drop redundant nops",
		run: func(_ *state, f form) form { fuseSync(f.built); return f }},
	{name: "limits", in: formPlan, out: formPlan,
		doc: "check the plan against the executor's structural rules and limits",
		run: func(st *state, f form) form { checkLimits(st, f.built); return f }},
}

// form is what one pass hands the next. Exactly one of its fields is set
// between passes (formCheck): a pass consumes the form it takes.
type form struct {
	ev    *evaluated
	prog  *program
	built *built
}

// formKind names a form, for the pass table and the check between passes.
type formKind int

const (
	formFile      formKind = iota // the parsed program (the state's)
	formEvaluated                 // *evaluated: header and ops
	formActions                   // *program before assign-tbs
	formBlocks                    // *program with its actions in blocks
	formPlan                      // *built: the plan and its source map
)

func (k formKind) String() string {
	switch k {
	case formFile:
		return "*dsl.File"
	case formEvaluated:
		return "*evaluated"
	case formActions:
		return "*program (actions)"
	case formBlocks:
		return "*program (actions in blocks)"
	case formPlan:
		return "*built (plan)"
	}
	return fmt.Sprintf("formKind(%d)", int(k))
}
