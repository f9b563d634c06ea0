// Package compiler turns a parsed schedule (dsl.File) into an ir.Plan
// through a declarative list of named passes (passes.go): evaluate the
// program's loops and parameters, lower chunk-level moves to plan ops,
// assign thread blocks, replicate instances, fuse data ops, insert the
// synchronisation (nop, signal/wait, semaphores, flush) the memory model
// needs, allocate channels and build the plan, fuse sync ops, and check the
// executor's limits. Each pass takes the form the one before returned
// (evaluated ops, actions, actions in blocks, the plan) and returns its
// own; besides that it sees only the program, the options and the
// diagnostics (state). Every pass can be dumped (Options.DumpAfter) and,
// with Options.Check, the form is checked after every pass and the plan
// validated (ir.Validate) after every pass that produces one. A SourceMap ties every emitted op back to the DSL line it
// came from, so CPU-executor findings (Verify) are reported at the source.
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
