package compiler

import (
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
)

// RunDiagnostics words one CPU executor report the way Verify words a
// proof's findings (at the DSL statements sm maps the ops to; sm may be
// nil), for callers that run a single simulation with options of their
// own (a size, type, reduction and launch count) rather than the proof.
// run names the simulation in each detail ("1048576 bytes, f16").
func RunDiagnostics(rep *cpu.Report, sm *SourceMap, run string) Diagnostics {
	return reportDiags(rep, sm, run)
}

// Finding kinds, in the order a verdict takes them (the CPU executor's:
// a deadlock hides what follows it, then races, then unbalanced signals,
// then wrong results).
const (
	KindDeadlock    = "deadlock"
	KindRace        = "race"
	KindUnbalanced  = "unbalanced"
	KindWrongResult = "wrong result"
	KindClobbered   = "clobbered" // an out-of-place collective changed its input; a wrong result
	KindError       = "error"     // the plan could not be simulated (no admitted size, too large)
)

// FindingKind names what a diagnostic of Verify or RunDiagnostics found,
// for callers that act on the kind rather than the wording (the C ABI's
// verdicts). It is derived from the summaries reportDiags writes, so a
// change of wording there must keep these prefixes (capi's tests check
// every kind against the executor's own verdict on the wrong corpus).
func FindingKind(d dsl.Diagnostic) string {
	// reportDiags' fallback when a failing report has no finding of its
	// own: "verdict: race".
	if v, ok := strings.CutPrefix(d.Summary, "verdict: "); ok {
		for _, k := range []string{KindDeadlock, KindRace, KindUnbalanced, KindWrongResult} {
			if v == k {
				return k
			}
		}
	}
	for _, k := range findingPrefixes {
		if strings.HasPrefix(d.Summary, k.prefix) {
			return k.kind
		}
	}
	return KindError
}

var findingPrefixes = []struct{ prefix, kind string }{
	{"deadlock:", KindDeadlock},
	{"race on ", KindRace},
	{"signal never waited for", KindUnbalanced},
	{"wrong result", KindWrongResult},
	{"input clobbered:", KindClobbered},
}

// VerdictOf is the verdict a list of findings adds up to: "correct" when
// none is an error, else the first kind in the executor's order
// (deadlock, race, unbalanced, wrong result, error).
func VerdictOf(ds Diagnostics) string {
	rank := map[string]int{KindDeadlock: 0, KindRace: 1, KindUnbalanced: 2, KindWrongResult: 3, KindClobbered: 3, KindError: 4}
	best, verdict := len(rank), cpu.Correct.String()
	for _, d := range ds {
		if d.Severity != dsl.Error {
			continue
		}
		k := FindingKind(d)
		if r := rank[k]; r < best {
			best, verdict = r, k
			if k == KindClobbered {
				verdict = KindWrongResult
			}
		}
	}
	return verdict
}
