package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// jsonError is a failed run under --json: report prints it the way the
// toolchain prints diagnostics for tools, one JSON line with a stable
// code (exec.size, exec.not-resident, exec.watchdog, ...; exec.failed
// when the error carries none), so a script that reads the rows on
// stdout branches on the code on stderr, never on the text.
type jsonError struct{ err error }

func (e jsonError) Error() string { return e.err.Error() }
func (e jsonError) Unwrap() error { return e.err }

// asJSON marks err for report when --json is set. A wrong invocation
// stays text: it is for the person typing, and comes before the flags
// are known.
func asJSON(err error, json bool) error {
	var u usageError
	if err == nil || !json || errors.As(err, &u) {
		return err
	}
	return jsonError{err}
}

// report prints run's error on w (nothing for nil): through diag.Render
// as a JSON line under --json, else as the line "msccl-bench: ...".
func report(w io.Writer, err error) {
	var je jsonError
	switch {
	case err == nil:
	case errors.As(err, &je):
		diag.Render(w, diag.FromError(je.err, diag.CodeFailed), diag.JSON)
	default:
		fmt.Fprintln(w, "msccl-bench:", err)
	}
}
