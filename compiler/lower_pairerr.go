package compiler

import (
	"fmt"

	"github.com/msccl-go/msccl-go/dsl"
)

// A statement inside loops over ranks meets a mistake of its own (a copy
// `via memory` between nodes, a remote-reading reduce across nodes) once
// per rank pair: 32 errors at one line for one mistake. pairErrorf
// reports the first pair and counts the rest, which foldPairErrors adds
// to it as "(and N more rank pairs)".

type pairErrKey struct {
	at   dsl.Pos
	kind string
}

type pairErr struct {
	i    int // the reported diagnostic's index in st.diags; -1 when none was added
	more int
}

// pairErrorf reports an error of kind at r unless one was reported there
// already, which it counts instead.
func (lw *lowerer) pairErrorf(kind string, r dsl.Range, detail, format string, args ...any) {
	k := pairErrKey{r.Start, kind}
	if e := lw.pairErrs[k]; e != nil {
		e.more++
		return
	}
	if lw.pairErrs == nil {
		lw.pairErrs = map[pairErrKey]*pairErr{}
	}
	n := len(lw.st.diags)
	lw.st.errorf(r, detail, format, args...)
	e := &pairErr{i: -1}
	if len(lw.st.diags) > n {
		e.i = n
	}
	lw.pairErrs[k] = e
}

// foldPairErrors words the counted repeats into their first reports.
func (lw *lowerer) foldPairErrors() {
	for _, e := range lw.pairErrs {
		if e.i >= 0 && e.more > 0 {
			lw.st.diags[e.i].Summary += fmt.Sprintf(" (and %d more rank pair%s)", e.more, plural(e.more))
		}
	}
}
