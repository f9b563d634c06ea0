package main

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// Under --json a failed run is one diagnostic JSON line on stderr with
// the error's code (exec.failed without one); without it, or for a wrong
// invocation, the usual text line; the exit status does not change.
func TestReportJSON(t *testing.T) {
	refused := fmt.Errorf("size 3: %w", diag.Errorc(diag.CodeSizeRefused, "message size 3 bytes is outside the plan's size rule"))
	missing := run([]string{"--plan", "/nonexistent/plan.json", "--json"}, io.Discard)
	for _, c := range []struct {
		name string
		err  error
		want string
		exit int
	}{
		{"coded", asJSON(refused, true), `{"severity":"error","code":"exec.size","summary":"size 3: message size 3 bytes is outside the plan's size rule"}` + "\n", 1},
		{"text", asJSON(refused, false), "msccl-bench: size 3: message size 3 bytes is outside the plan's size rule\n", 1},
		{"no code", missing, `{"severity":"error","code":"exec.failed","summary":"open /nonexistent/plan.json: no such file or directory"}` + "\n", 1},
		{"usage", run([]string{"--bogus", "--json"}, io.Discard), "msccl-bench: flag provided but not defined: -bogus (msccl-bench -h lists the flags)\n", 2},
	} {
		var b bytes.Buffer
		report(&b, c.err)
		if b.String() != c.want || exitCode(c.err) != c.exit {
			t.Errorf("%s: printed %q, exit %d; want %q, exit %d", c.name, b.String(), exitCode(c.err), c.want, c.exit)
		}
	}
	var b bytes.Buffer
	if report(&b, nil); b.Len() != 0 {
		t.Errorf("report(nil) printed %q", b.String())
	}
}
