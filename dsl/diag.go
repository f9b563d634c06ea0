package dsl

import "github.com/msccl-go/msccl-go/internal/diag"

// The language reports problems as the toolchain's one diagnostic type
// (internal/diag): the compiler and the plan validator use the same, so a
// program's diagnostics flow from parser to command line unchanged. These
// names are how users outside the module reach it.
type (
	// Pos is a place in a source file. Line and Col are 1-based; the zero
	// Pos means "no position".
	Pos = diag.Pos
	// Range is the half-open span [Start, End) of a construct.
	Range = diag.Range
	// Diagnostic is one problem, shaped after HCL's: severity (IsError),
	// a stable Code, a one-line Summary, an optional Detail (often a
	// suggestion) and the Subject range it is about.
	Diagnostic = diag.Diagnostic
	// Diagnostics is a list of problems; every phase collects rather than
	// stops at the first.
	Diagnostics = diag.Diagnostics
)

// CodeSyntax is the code of every parse error.
const CodeSyntax = diag.CodeSyntax
