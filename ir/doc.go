// Package ir owns the execution plan: the Go types for a plan in the
// MSCCL++ v0.8+ JSON schema, the op table that drives everything that
// touches ops, the JSON schema written once as tables (schema.go: each
// key, its Go field, when it is required, when it is left out) from which
// the strict codec (Decode, Encode) works both ways, the structural
// validator (Validate, which the compiler also runs between its passes;
// Load, and LoadFile for a file, decode and validate), the upstream
// executor's limits (limits.go), the chunk geometry (which bytes a buffer
// reference covers at a given message size), a human-readable text dump
// (Dump) and deep copies (Plan.Clone) for tests that mutate plans.
//
// Problems are data: Decode and Validate return Diagnostics, each located
// by a JSON path such as gpus[1].threadblocks[0].ops[3].dst_buff[0].index,
// and report everything they find instead of stopping at the first.
// Neither panics on any input.
// Validate checks the ranks of a large plan on several cores and joins
// their diagnostics in rank order, so the report is the same either way.
//
// ir sits in the middle of the data flow (dsl → compiler → ir → executor):
// it must not import the compiler, the executors or the runtime. Everything
// that needs to know "what does op X take" asks the table in ops.go, so
// adding an op is one edit there.
package ir
