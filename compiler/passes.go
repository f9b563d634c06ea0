package compiler

// passes is the pipeline, in order. Each lives in its own pass_*.go file.
var passes = []pass{
	{name: "evaluate", doc: "run params, let, for and if; check names, ranks and chunk ranges", run: evaluate},
	{name: "lower", doc: "turn chunk moves into plan ops and pick channel types", run: lower},
	{name: "assign-tbs", doc: "place every op on a thread block of its rank", run: assignTBs},
	{name: "instances", doc: "replicate blocks and split chunks for option instances", run: replicate},
	{name: "fuse", doc: "merge reduce chains, reduce+send (res, rres, respkt, recpkt, recspkt) and multi-peer puts", run: fuse},
	{name: "sync", doc: "insert nop, signal/wait, semaphores and flushes from data dependencies", run: insertSync},
	{name: "channels", doc: "allocate and pair channels, remote buffers, semaphores; build the plan", run: buildPlan, plan: true},
	{name: "fuse-sync", doc: "merge multi-channel signal/wait, put+signal(+flush) into pws/pwsf, drop redundant nops", run: fuseSync, plan: true},
	{name: "limits", doc: "check the plan against the executor's structural rules and limits", run: checkLimits, plan: true},
}
