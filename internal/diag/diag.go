package diag

import (
	"fmt"
	"sort"
	"strings"

	"github.com/msccl-go/msccl-go/internal/textdist"
)

// Pos is a place in a source or plan file. Line and Col are 1-based; the
// zero Pos means "no position".
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

// Diagnostic is one problem, shaped after HCL's hcl.Diagnostic and
// esbuild's logger.Msg: a stable Code that callers branch on, a one-line
// Summary and an optional Detail (often the fix) for people, and where it
// is: Subject, a range of a source file (or the line and column of a
// malformed plan file), and Path, the JSON path of the plan element
// (gpus[1].threadblocks[0].ops[3].dst_buff[0].index). Wording may change
// from release to release; codes do not.
type Diagnostic struct {
	Severity Severity
	// Code names the kind of problem (codes.go); never empty in what the
	// module reports.
	Code    string
	Summary string
	Detail  string
	Subject Range
	Path    string
	// Count and Max are set with a limit code (IsLimit): what the plan
	// uses and the most the upstream executor holds.
	Count, Max int
}

// IsError reports whether d is an error rather than a warning.
func (d Diagnostic) IsError() bool { return d.Severity == Error }

// IsLimit reports whether d is one of the upstream executor's table sizes
// exceeded (a plan that is well formed but too big for upstream).
func (d Diagnostic) IsLimit() bool { return strings.HasPrefix(d.Code, limitPrefix) }

// String renders d for a terminal: `file:line:col: error: path: summary;
// detail`, each part present only when known (the form compilers use, so
// editors jump to the place).
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Subject.Start.IsValid() || d.Subject.Start.Filename != "" {
		b.WriteString(d.Subject.Start.String())
		b.WriteString(": ")
	}
	b.WriteString(d.Severity.String())
	b.WriteString(": ")
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString("; ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Errorf builds an error diagnostic with code at r.
func Errorf(code string, r Range, detail, format string, args ...any) Diagnostic {
	return Diagnostic{Severity: Error, Code: code, Summary: fmt.Sprintf(format, args...), Detail: detail, Subject: r}
}

// Diagnostics is a list of problems; every phase collects rather than
// stops at the first.
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

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == Error {
			out = append(out, d)
		}
	}
	return out
}

// Has reports whether any diagnostic carries code.
func (ds Diagnostics) Has(code string) bool {
	for _, d := range ds {
		if d.Code == code {
			return true
		}
	}
	return false
}

// String is Text: one line per diagnostic.
func (ds Diagnostics) String() string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Sort orders diagnostics by source position (stably: diagnostics without
// one keep their order) so output does not depend on the order of work.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Subject.Start, ds[j].Subject.Start
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Err returns ds as an error when it holds any error, else nil. The
// error keeps the diagnostics (errors.As with *diag.Error, or the
// Diagnostics method of the error) so that a caller far up can still
// branch on codes.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return &Err{Diags: ds}
}

// Err is Diagnostics as a Go error.
type Err struct{ Diags Diagnostics }

// Error lists the errors, one a line.
func (e *Err) Error() string { return strings.TrimRight(e.Diags.Errors().String(), "\n") }

// Suggest returns `did you mean "x"?` for the candidate closest to name,
// or "" when nothing is close enough to be a likely typo (at most a third
// of a short name, and three edits, may differ; ties go to the first in
// alphabetical order).
func Suggest(name string, candidates []string) string {
	best, bestD := "", min(len(name)/2+2, 3)
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
