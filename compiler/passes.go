package compiler

// passes is the pipeline, in order. Each lives in its own pass_*.go file.
var passes = []pass{
	{name: "evaluate", doc: "run params, let, for and if; check names, ranks and chunk ranges", run: evaluate},
	{name: "lower", doc: "turn chunk moves into plan ops and pick channel types", run: lower},
	{name: "assign-tbs", doc: "place every op on a thread block of its rank", run: assignTBs},
	{name: "instances", doc: "replicate blocks and split chunks for option instances", run: replicate},
	{name: "fuse", doc: "merge reduce chains, reduce+send (res, rres, respkt, recpkt, recspkt) and multi-peer puts", run: fuse},
	// Sync and channel building are one pass: sync's result is no form of
	// its own (a dump after it showed fuse's actions unchanged), only what
	// channel building reads, and for chunk-level programs sync lays each
	// block out while the plan is written.
	{name: "sync", doc: "insert nop, signal/wait, semaphores and flushes from data dependencies; allocate and pair channels, remote buffers, semaphores; build the plan", run: syncAndBuild, plan: true},
	{name: "fuse-sync", doc: "merge multi-channel signal/wait, put+signal(+flush) into pws/pwsf, drop redundant nops", run: fuseSync, plan: true},
	{name: "limits", doc: "check the plan against the executor's structural rules and limits", run: checkLimits, plan: true},
}
