package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// Severity of a diagnostic.
type Severity uint8

const (
	SevError Severity = iota
	SevWarning
)

func (s Severity) String() string {
	if s == SevWarning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem in a plan, located by its JSON path
// (gpus[1].threadblocks[0].ops[3].dst_buff[0].index) or, for malformed
// JSON, by line and column of the file.
type Diagnostic struct {
	Severity Severity
	Path     string // JSON path; empty for syntax errors
	Line     int    // 1-based; 0 when the path says where
	Col      int
	Msg      string
	// Code names the rule broken, for callers that act on the kind of a
	// problem rather than its wording (the compiler places limit errors at
	// the DSL statement behind them); empty for most diagnostics.
	Code string
	// Count and Max are set with a limit code: what the plan uses and the
	// most the upstream executor holds.
	Count, Max int
}

// Codes of the upstream executor's fixed table sizes (limits.go). Msg
// words them for people; these stay put when the wording changes.
const (
	CodeOpsPerBlock           = "limit.ops-per-block"
	CodeChannelsPerBlock      = "limit.channels-per-block"
	CodeRemoteBuffersPerBlock = "limit.remote-buffers-per-block"
	CodeChannelsPerOp         = "limit.channels-per-op"
	CodeRefsPerOp             = "limit.refs-per-op"
	CodeSemaphoresPerOp       = "limit.semaphores-per-op"
)

// CodeUnsignaledWait: a wait whose partner channel no op signals (a
// deadlock visible without running the plan). The compiler reports the
// same defect at its source when it checks the pairs (pass limits), so
// its checker between passes leaves this one to it.
const CodeUnsignaledWait = "sync.unsignaled-wait"

// IsLimit reports whether d is one of the executor's table sizes exceeded
// (a plan that is well formed but too big for upstream).
func (d Diagnostic) IsLimit() bool {
	switch d.Code {
	case CodeOpsPerBlock, CodeChannelsPerBlock, CodeRemoteBuffersPerBlock, CodeChannelsPerOp, CodeRefsPerOp, CodeSemaphoresPerOp:
		return true
	}
	return false
}

func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Severity.String())
	b.WriteString(": ")
	if d.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", d.Line, d.Col)
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	return b.String()
}

// Diagnostics is a list of problems; the codec and validator collect
// rather than stop at the first.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SevError {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SevError {
			out = append(out, d)
		}
	}
	return out
}

func (ds Diagnostics) String() string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Err returns ds as an error when it holds any error, else nil.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return &DiagError{Diags: ds}
}

// DiagError wraps diagnostics as a Go error.
type DiagError struct{ Diags Diagnostics }

func (e *DiagError) Error() string {
	errs := e.Diags.Errors()
	if len(errs) == 1 {
		return errs[0].String()
	}
	return fmt.Sprintf("%d errors:\n%s", len(errs), strings.TrimRight(errs.String(), "\n"))
}

// diagSink collects diagnostics while walking a plan.
type diagSink struct{ ds Diagnostics }

func (s *diagSink) errorf(path, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: SevError, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (s *diagSink) warnf(path, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: SevWarning, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// jpath is a JSON path the validator builds only when it reports: a plan
// of millions of ops must not cost a formatted string per op. Each element
// is a key (".ops", "gpus") and, when idx >= 0, an index; elements live on
// the walker's stack and point up to their parent.
type jpath struct {
	up  *jpath
	key string
	idx int
}

// at returns the child path p.key[i] (i < 0: no index).
func (p *jpath) at(key string, i int) jpath { return jpath{up: p, key: key, idx: i} }

func (p *jpath) String() string {
	if p == nil {
		return ""
	}
	return string(p.appendTo(make([]byte, 0, 64)))
}

func (p *jpath) appendTo(b []byte) []byte {
	if p.up != nil {
		b = p.up.appendTo(b)
	}
	b = append(b, p.key...)
	if p.idx >= 0 {
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p.idx), 10)
		b = append(b, ']')
	}
	return b
}

// heapPath copies p into one element for a recursive walk (pipeline
// bodies), whose paths escape analysis cannot keep on the stack: the
// copy, not p, then escapes, so the flat walk over ops stays free.
func heapPath(p *jpath) *jpath { return &jpath{key: p.String(), idx: -1} }

// errorp reports an error at p followed by the static suffix sub.
func (s *diagSink) errorp(p *jpath, sub, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: SevError, Path: p.String() + sub, Msg: fmt.Sprintf(format, args...)})
}

// codep reports an error at p+sub that callers tell apart by its code.
func (s *diagSink) codep(p *jpath, sub, code, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: SevError, Path: p.String() + sub, Msg: fmt.Sprintf(format, args...), Code: code})
}

// limitp reports at p+sub that the plan uses count where the upstream
// executor holds max (code says which table).
func (s *diagSink) limitp(p *jpath, sub, code string, count, max int, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: SevError, Path: p.String() + sub, Msg: fmt.Sprintf(format, args...), Code: code, Count: count, Max: max})
}

func (s *diagSink) warnp(p *jpath, sub, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: SevWarning, Path: p.String() + sub, Msg: fmt.Sprintf(format, args...)})
}
