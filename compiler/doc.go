// Package compiler turns a parsed schedule (dsl.File) into an ir.Plan
// through a declarative list of named passes (passes.go): evaluate the
// program's loops and parameters, lower chunk-level moves to plan ops,
// assign thread blocks, replicate instances, fuse data ops, insert the
// synchronisation (nop, signal/wait, semaphores, flush) the memory model
// needs, allocate channels and build the plan, fuse sync ops, and check the
// executor's limits. Each pass is a typed function of the form the one
// before returned (forms.go: evaluated ops, actions, actions in blocks,
// the plan) to the form it returns, or a rewrite of that form in place;
// the table reads its types off the function (step, rewrite), so the
// chain is checked (TestPassChain) and no pass can reach a form it was
// not given. Besides its form a pass sees only the program, the options
// and the diagnostics (state.go). Every pass can be dumped
// (Options.DumpAfter) and, with Options.Check, what it returned is checked
// for what its type does not say (handoffCheck) and the plan validated
// (ir.Validate) after every pass that returns one. A SourceMap ties every
// emitted op back to the DSL line it came from, so CPU-executor findings
// (Verify) are reported at the source.
//
// Once channels are allocated the ranks are independent: channels,
// fuse-sync and the validator handle large plans a rank at a time on
// GOMAXPROCS workers (internal/par), each rank writing only its own part,
// so the plan and its diagnostics do not depend on the number of workers.
// Before that, sync's program-order walk is split in two phases that
// overlap on two workers (finding each node's producers, then turning them
// into sync items), handing records over in program order, and its
// cross-launch search splits the chunks among workers and merges by
// minimum and union.
//
// compiler reads dsl and writes ir; it must not import the executors'
// internals beyond executor/cpu's public Run (Verify), nor the runtime.
package compiler
