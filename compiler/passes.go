package compiler

// passes is the pipeline, in order. Each lives in its own pass_*.go file
// and is a function of the form it takes (in) to the form it returns
// (out); run adapts it to the table. What every pass may touch besides
// its form is the state (state.go): the program, options and diagnostics.
var passes = []pass{
	{name: "evaluate", in: "dsl.File", out: "evaluated",
		doc: "run params, let, for and if; check names, ranks and chunk ranges",
		run: func(st *state, _ form) form { return form{ev: evaluate(st)} }},
	{name: "lower", in: "evaluated", out: "actions",
		doc: "turn chunk moves into plan ops and pick channel types",
		run: func(st *state, f form) form { return form{prog: lower(st, f.ev)} }},
	{name: "assign-tbs", in: "actions", out: "actions in blocks",
		doc: "place every op on a thread block of its rank",
		run: func(st *state, f form) form { assignTBs(st, f.prog); return f }},
	{name: "instances", in: "actions in blocks", out: "actions in blocks",
		doc: "replicate blocks and split chunks for option instances",
		run: func(st *state, f form) form { replicate(st, f.prog); return f }},
	{name: "fuse", in: "actions in blocks", out: "actions in blocks",
		doc: "merge reduce chains, reduce+send (res, rres, respkt, recpkt, recspkt) and multi-peer puts",
		run: func(st *state, f form) form { fuse(st, f.prog); return f }},
	// Sync and channel building are one pass: sync's result is no form of
	// its own (a dump after it showed fuse's actions unchanged), only what
	// channel building reads, and for chunk-level programs sync lays each
	// block out while the plan is written.
	{name: "sync", in: "actions in blocks", out: "plan",
		doc: "insert nop, signal/wait, semaphores and flushes from data dependencies; allocate and pair channels, remote buffers, semaphores; build the plan",
		run: func(st *state, f form) form { return form{built: syncAndBuild(st, f.prog)} }, plan: true},
	{name: "fuse-sync", in: "plan", out: "plan",
		doc: "merge multi-channel signal/wait, put+signal(+flush) into pws/pwsf, drop redundant nops",
		run: func(_ *state, f form) form { fuseSync(f.built); return f }, plan: true},
	{name: "limits", in: "plan", out: "plan",
		doc: "check the plan against the executor's structural rules and limits",
		run: func(st *state, f form) form { checkLimits(st, f.built); return f }, plan: true},
}

// form is what one pass hands the next. Exactly one of its fields is set
// between passes (formCheck): a pass consumes the form it takes.
type form struct {
	ev    *evaluated
	prog  *program
	built *built
}
