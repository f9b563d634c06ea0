package ir

import (
	"fmt"
	"strconv"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// Diagnostic is one problem in a plan, located by its JSON path (Path:
// gpus[1].threadblocks[0].ops[3].dst_buff[0].index) or, for malformed
// JSON, by line and column of the file (Subject). It is the toolchain's
// one diagnostic type, the one dsl and compiler report too; branch on its
// Code, never on its wording.
type Diagnostic = diag.Diagnostic

// Diagnostics is a list of problems; the codec and validator collect
// rather than stop at the first.
type Diagnostics = diag.Diagnostics

// The codes plan diagnostics carry. A plan too big for one of the
// upstream executor's fixed tables carries a limit code (IsLimit:
// limit.ops-per-block, limit.channels-per-block,
// limit.remote-buffers-per-block, limit.channels-per-op,
// limit.refs-per-op, limit.semaphores-per-op), with Count and Max saying
// what the plan uses and the most the table holds.
const (
	CodeSyntax     = diag.CodePlanSyntax     // malformed JSON
	CodeSchema     = diag.CodePlanSchema     // JSON that is not a plan: unknown op, wrong type, missing key
	CodeInvalid    = diag.CodePlanInvalid    // a structural rule broken
	CodeSuspicious = diag.CodePlanSuspicious // warnings: legal, probably not meant
	// CodeUnsignaledWait: a wait whose partner channel no op signals (a
	// deadlock visible without running the plan). The compiler reports
	// the same defect at its source when it checks the pairs (pass
	// limits), so its checker between passes leaves this one to it.
	CodeUnsignaledWait = diag.CodeUnsignaledWait
)

// diagSink collects diagnostics while walking a plan.
// code is the code of its errors (CodeInvalid when empty); warnings are
// CodeSuspicious.
type diagSink struct {
	ds   Diagnostics
	code string
}

func (s *diagSink) errCode() string {
	if s.code == "" {
		return CodeInvalid
	}
	return s.code
}

func (s *diagSink) errorf(path, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: diag.Error, Code: s.errCode(), Path: path, Summary: fmt.Sprintf(format, args...)})
}

func (s *diagSink) warnf(path, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: diag.Warning, Code: CodeSuspicious, Path: path, Summary: fmt.Sprintf(format, args...)})
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
	s.ds = append(s.ds, Diagnostic{Severity: diag.Error, Code: s.errCode(), Path: p.String() + sub, Summary: fmt.Sprintf(format, args...)})
}

// codep reports an error at p+sub that callers tell apart by its code.
func (s *diagSink) codep(p *jpath, sub, code, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: diag.Error, Path: p.String() + sub, Summary: fmt.Sprintf(format, args...), Code: code})
}

// limitp reports at p+sub that the plan uses count where the upstream
// executor holds max (code says which table).
func (s *diagSink) limitp(p *jpath, sub, code string, count, max int, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: diag.Error, Path: p.String() + sub, Summary: fmt.Sprintf(format, args...), Code: code, Count: count, Max: max})
}

func (s *diagSink) warnp(p *jpath, sub, format string, args ...any) {
	s.ds = append(s.ds, Diagnostic{Severity: diag.Warning, Code: CodeSuspicious, Path: p.String() + sub, Summary: fmt.Sprintf(format, args...)})
}

// DiagError is Diagnostics as a Go error (Check, Load): errors.As finds
// it, and its Diags keep the codes.
type DiagError = diag.Err
