package cpu

import (
	"fmt"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Diagnostics is the report's findings as the toolchain's diagnostics
// (the type dsl, ir and the compiler report with), one per stuck block,
// race, unbalanced signal, wrong range (or wrong element, where nothing
// folded them) and overwritten input, each with its proof code
// (proof.deadlock, proof.race, proof.unbalanced, proof.wrong-result,
// proof.input-clobbered) and the JSON path of the op it is about; nil
// for a correct run. Tools branch on the codes; the words are
// Report.String's.
func (r *Report) Diagnostics() ir.Diagnostics {
	var ds ir.Diagnostics
	add := func(code string, at *Place, detail, format string, args ...any) {
		d := ir.Diagnostic{Code: code, Summary: fmt.Sprintf(format, args...), Detail: detail}
		if at != nil {
			d.Path = at.Path()
		}
		ds = append(ds, d)
	}
	for i := range r.Deadlocks {
		s := &r.Deadlocks[i]
		add(diag.CodeDeadlock, &s.Place, "", "deadlock: %s waits for %s", s.Place, s.Waiting)
	}
	for i := range r.Races {
		x := &r.Races[i]
		fix := ""
		if x.Cause.Kind != 0 {
			fix = x.Cause.Fix(planWhere)
		}
		add(diag.CodeRace, &x.A.Place, fix, "race: %s and %s", x.A, x.B)
	}
	for i := range r.Unbalanced {
		u := &r.Unbalanced[i]
		add(diag.CodeUnbalanced, &u.Place, "", "unbalanced: %s: %d signal(s) on %s never waited for", u.Place, u.Count, u.Channel)
	}
	more := ""
	if r.WrongTotal > 0 {
		more = fmt.Sprintf("%d wrong elements in all", r.WrongTotal)
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		what := f.Explain
		if what == "" {
			what = "differ from the collective's definition"
		}
		add(diag.CodeWrongResult, f.Writer, more, "wrong result: launch %d rank %d output[%d:%d] (%d elements): %s", f.Launch, f.Rank, f.Off, f.End, f.Elems, what)
	}
	if len(r.Findings) == 0 {
		for i := range r.Wrong {
			m := &r.Wrong[i]
			add(diag.CodeWrongResult, m.Writer, more, "wrong result: launch %d rank %d output[%d]: got %s, want %s", m.Launch, m.Rank, m.Off, m.Got, m.Want)
		}
	}
	for i := range r.Clobbered {
		c := &r.Clobbered[i]
		add(diag.CodeInputClobbered, c.Writer, "", "input overwritten: %s", c)
	}
	return ds
}
