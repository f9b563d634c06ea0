// Package diag is the one diagnostic type of the toolchain: the language
// (dsl), the plan codec and validator (ir), the compiler and the CPU
// executor's proof all report problems as diag.Diagnostic values, and one
// renderer prints them for people (Text) or tools (JSON).
//
// It owns the Diagnostic shape, the table of stable codes (codes.go), the
// coded error the executors return and the lookup of an error's code
// through any wrapping (errors.go), and the "did you mean" helper. It must not import anything of the module
// but internal/textdist: every layer, ir included, depends on it, so it
// sits below them all. Users outside the module name the type through the
// aliases dsl.Diagnostic, ir.Diagnostic and compiler.Diagnostics, and the
// codes through the constants the public packages re-export.
package diag
