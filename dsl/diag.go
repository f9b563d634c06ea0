package dsl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/msccl-go/msccl-go/internal/textdist"
)

// Pos is a place in a source file. Line and Col are 1-based; the zero Pos
// means "no position".
type Pos struct {
	Filename string
	Offset   int
	Line     int
	Col      int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.Filename
	}
	if p.Filename == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Col)
}

// IsValid reports whether p names a place.
func (p Pos) IsValid() bool { return p.Line > 0 }

// Range is the half-open span [Start, End) of a construct.
type Range struct{ Start, End Pos }

// Severity of a diagnostic.
type Severity uint8

const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem found in a program, shaped after HCL's: a one
// line summary, an optional detail sentence (often a suggestion) and the
// source range it is about.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	Subject  Range
}

func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Subject.Start.IsValid() || d.Subject.Start.Filename != "" {
		b.WriteString(d.Subject.Start.String())
		b.WriteString(": ")
	}
	b.WriteString(d.Severity.String())
	b.WriteString(": ")
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString("; ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Diagnostics is a list of problems; every phase collects rather than stops
// at the first.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

func (ds Diagnostics) String() string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Err returns the diagnostics as an error when any is an error.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return diagError(ds)
}

type diagError Diagnostics

func (e diagError) Error() string { return strings.TrimRight(Diagnostics(e).String(), "\n") }

// Sort orders diagnostics by position so output is stable.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Subject.Start, ds[j].Subject.Start
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Errorf builds an error diagnostic at r.
func Errorf(r Range, detail, format string, args ...any) Diagnostic {
	return Diagnostic{Severity: Error, Summary: fmt.Sprintf(format, args...), Detail: detail, Subject: r}
}

// Suggest returns `did you mean "x"?` for the candidate closest to name,
// or "" when nothing is close enough to be a likely typo.
func Suggest(name string, candidates []string) string {
	best, bestD := "", len(name)/2+2
	if bestD > 3 {
		bestD = 3
	}
	for _, c := range candidates {
		if d := textdist.Levenshtein(name, c); d < bestD || (d == bestD && best != "" && c < best) {
			if d < bestD {
				best, bestD = c, d
			} else {
				best = c
			}
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}
