package compiler

import (
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// RunDiagnostics words one CPU executor report the way Verify words a
// proof's findings (at the DSL statements sm maps the ops to; sm may be
// nil), for callers that run a single simulation with options of their
// own (a size, type, reduction and launch count) rather than the proof.
// run names the simulation in each detail ("1048576 bytes, f16").
func RunDiagnostics(rep *cpu.Report, sm *SourceMap, run string) Diagnostics {
	return reportDiags(rep, sm, run)
}

// Finding kinds: the verdict names of the CPU executor (cpu.Verdict),
// plus clobbered (an out-of-place collective changed its input, which the
// executor counts as a wrong result) and error (the plan could not be
// simulated: no admitted size, too large).
const (
	KindDeadlock    = "deadlock"
	KindRace        = "race"
	KindUnbalanced  = "unbalanced"
	KindWrongResult = "wrong result"
	KindClobbered   = "clobbered"
	KindError       = "error"
)

// kinds maps the proof's diagnostic codes to kinds, in the order a
// verdict takes them (the executor's: a deadlock hides what follows it,
// then races, then unbalanced signals, then wrong results).
var kinds = []struct {
	code, kind string
}{
	{diag.CodeDeadlock, KindDeadlock},
	{diag.CodeRace, KindRace},
	{diag.CodeUnbalanced, KindUnbalanced},
	{diag.CodeWrongResult, KindWrongResult},
	{diag.CodeInputClobbered, KindClobbered},
}

// FindingKind names what a diagnostic of Verify or RunDiagnostics found,
// in the executor's words, for callers that report verdicts (the C ABI).
func FindingKind(d diag.Diagnostic) string {
	for _, k := range kinds {
		if d.Code == k.code {
			return k.kind
		}
	}
	return KindError
}

// VerdictOf is the verdict a proof's findings add up to: "correct" when
// none is an error, else the kind of the first in the executor's order
// (deadlock, race, unbalanced, wrong result; a clobbered input is a wrong
// result), or error when only problems outside the run were found.
func VerdictOf(ds Diagnostics) string {
	best, verdict := len(kinds)+1, cpu.Correct.String()
	for _, d := range ds {
		if !d.IsError() {
			continue
		}
		k := FindingKind(d)
		r := len(kinds)
		for i, x := range kinds {
			if x.kind == k {
				r = i
			}
		}
		if r < best {
			best, verdict = r, k
		}
	}
	if verdict == KindClobbered {
		verdict = KindWrongResult
	}
	return verdict
}
