package compiler

import (
	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// state is what the passes share besides the form they hand on
// (forms.go): the program, the options and the diagnostics, the way
// cmd/compile's passes share a *Func's config and logger. No pass's
// result is part of it.
type state struct {
	file    *dsl.File
	defines map[string]int64
	opts    Options
	diags   Diagnostics
	// code is what errorf's diagnostics carry: the running pass's
	// (diag.CompilePass) unless a check names a more precise one.
	code string
}

// sub returns a state for a worker or a trial: the same program and
// options, diagnostics of its own.
func (st *state) sub() *state {
	return &state{file: st.file, defines: st.defines, code: st.code, opts: st.opts}
}

// errorf reports an error at r with the running pass's code.
func (st *state) errorf(r dsl.Range, detail, format string, args ...any) {
	code := st.code
	if code == "" {
		code = diag.CompilePass("evaluate")
	}
	st.errorc(code, r, detail, format, args...)
}

// errorc reports an error at r with code.
func (st *state) errorc(code string, r dsl.Range, detail, format string, args ...any) {
	if len(st.diags) >= 50 {
		return // one mistake in a loop body must not bury the rest
	}
	d := diag.Errorf(code, r, detail, format, args...)
	for _, x := range st.diags {
		if x == d {
			return // the same mistake met again in a later loop iteration
		}
	}
	st.diags = append(st.diags, d)
}
