package main

import (
	"bytes"
	"slices"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// The commands read two kinds of file: schedules (.msccl: compile, fmt)
// and plans (JSON: sim, check, dump). Given the other kind, the parser
// or the JSON decoder would report the file's first byte as an error
// ("syntax error: unexpected \"{\"", "malformed JSON: invalid character
// 'c'"), which says nothing of the mix-up. These say what the file is
// and which command reads it.

// planHint is the diagnostic for a plan given to compile, nil when src
// is no plan: JSON begins with "{", which no statement does.
func planHint(path string, src []byte) diag.Diagnostics {
	t := bytes.TrimLeft(src, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil
	}
	return diag.Diagnostics{diag.Errorf(diag.CodeSyntax, fileStart(path),
		"run 'msccl-compile sim "+path+"' to simulate it, or 'msccl-compile compile' on the .msccl it came from",
		"this is a plan (JSON), not a schedule")}
}

// scheduleHint is the diagnostic for a schedule given to a command that
// reads plans, nil when data is no schedule: not JSON, and named .msccl
// or parsing as a program with a collective header (any word parses, as
// an op statement).
func scheduleHint(path string, data []byte) diag.Diagnostics {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) == 0 || t[0] == '{' || t[0] == '[' {
		return nil
	}
	if !strings.HasSuffix(path, ".msccl") {
		f, _ := dsl.Parse(path, data)
		if f == nil || !slices.ContainsFunc(f.Stmts, func(s *dsl.Stmt) bool { return s.Collective != nil }) {
			return nil
		}
	}
	return diag.Diagnostics{diag.Errorf(diag.CodePlanSyntax, fileStart(path),
		"run 'msccl-compile compile "+path+" -o plan.json' first: it compiles and proves the plan that this command reads",
		"this is a schedule, not a plan (JSON)")}
}

func fileStart(path string) diag.Range {
	return diag.Range{Start: diag.Pos{Filename: path, Line: 1, Col: 1}}
}
