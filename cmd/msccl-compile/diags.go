package main

import (
	"io"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// jsonFlag adds --json to a command: its diagnostics are then written as
// JSON lines on stderr (the way rustc --error-format=json reports), one
// object each with severity, code, summary, detail, file, line, col and
// path, so that a tool branches on codes instead of parsing text.
func jsonFlag(fs *flagSet) *diag.Format {
	f := new(diag.Format)
	fs.BoolFunc("json", "report diagnostics as JSON lines on stderr (severity, code, summary, detail, file, line, col, path)", func(string) error {
		*f = diag.JSON
		return nil
	})
	return f
}

// printDiags writes ds in format f: every command prints diagnostics
// through the one renderer, text and JSON alike.
func printDiags(w io.Writer, ds diag.Diagnostics, f diag.Format) {
	diag.Render(w, ds, f)
}
