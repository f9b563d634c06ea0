// Package ir owns the execution plan: the Go types for a plan in the
// MSCCL++ v0.8+ JSON schema, the op table that drives everything that
// touches ops, the strict JSON codec, the structural validator, the chunk
// geometry (which bytes a buffer reference covers at a given message size)
// and a human-readable text dump.
//
// ir sits in the middle of the data flow (dsl → compiler → ir → executor):
// it must not import the compiler, the executors or the runtime. Everything
// that needs to know "what does op X take" asks the table in ops.go, so
// adding an op is one edit there.
package ir
