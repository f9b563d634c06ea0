// Package dsl owns the schedule language: its grammar (the struct tags of
// ast.go, read by a hand-written lexer and recursive-descent parser that
// the tests hold against participle/v2 run on those tags), the syntax
// tree with source positions, positioned diagnostics and the canonical
// formatter behind `msccl-compile fmt`. The language itself is
// specified in docs/dsl.md.
//
// dsl knows nothing about plans: it must not import compiler, ir or the
// executors. Names (collectives, buffers, ops, options) are checked by the
// compiler, which reports problems through this package's Diagnostic so
// every message points at file:line:col.
package dsl
