package diag

import (
	"errors"
	"fmt"
)

// The executors return Go errors, not Diagnostics: a run fails once, at
// one place, and its callers wrap the error with where it happened
// (fmt.Errorf's %w). What a caller acts on is the error's code, found
// through any number of such wraps by CodeOf: the code rides along as an
// error in the chain (Coded, or any error type with a DiagCode method,
// such as the executors' HangError), so wrapping never loses it and the
// text stays free to change.

// Coder is an error that carries a stable code.
type Coder interface {
	error
	DiagCode() string
}

// Coded is an error with a code: the executors' refusals and failures
// that a caller may act on (a size the plan does not serve, blocks that
// cannot be resident at once, ...).
type Coded struct {
	Code string
	Err  error
}

func (e *Coded) Error() string    { return e.Err.Error() }
func (e *Coded) Unwrap() error    { return e.Err }
func (e *Coded) DiagCode() string { return e.Code }

// Errorc is fmt.Errorf with a code (%w wraps as usual).
func Errorc(code, format string, args ...any) error {
	return &Coded{Code: code, Err: fmt.Errorf(format, args...)}
}

// WithCode gives err code unless it already carries one: the code of
// the place that knows most (a size refusal deep in staging) outlives
// the general one an entry point adds (the run cannot start). nil stays
// nil.
func WithCode(code string, err error) error {
	if err == nil || CodeOf(err) != "" {
		return err
	}
	return &Coded{Code: code, Err: err}
}

// CodeOf is the code err carries: the outermost Coder in its chain (the
// first error's code of an *Err), or "" for an error without one.
func CodeOf(err error) string {
	var c Coder
	if errors.As(err, &c) {
		return c.DiagCode()
	}
	return ""
}

// DiagCode is the code of the first error of e.Diags.
func (e *Err) DiagCode() string {
	for _, d := range e.Diags {
		if d.IsError() {
			return d.Code
		}
	}
	return ""
}

// FromError is err as diagnostics, for the renderer (Render), so an
// executor's error reads in the terminal and in JSON the way the
// toolchain's diagnostics do: an *Err in the chain gives its own
// diagnostics; any other error one diagnostic with err's text as the
// summary and CodeOf(err), or fallback where err carries no code. nil
// gives nil.
func FromError(err error, fallback string) Diagnostics {
	if err == nil {
		return nil
	}
	var de *Err
	if errors.As(err, &de) && err == error(de) {
		return de.Diags.Errors()
	}
	code := CodeOf(err)
	if code == "" {
		code = fallback
	}
	return Diagnostics{{Severity: Error, Code: code, Summary: err.Error()}}
}
