package compiler

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// A finding is one diagnostic of a run and the key it folds under: what
// it says with the ranks, byte ranges, launches and run left out. One
// mistake in a schedule shows on every rank that runs the statement, in
// every launch and at every proof size, with byte ranges that scale with
// the size; those are one diagnostic ("... (and on 7 more ranks)"; "the
// same at 65536 bytes, symbolic ..."), placed at the statement.
type finding struct {
	d   diag.Diagnostic
	key string
}

// fold groups findings by key in the order they first appear.
type fold struct {
	groups []*foldGroup
	byKey  map[string]*foldGroup
}

type foldGroup struct {
	f      finding
	ranks  map[int]bool
	more   int      // occurrences after the first
	others []string // the later occurrences' places (deadlocks list them)
}

// add records an occurrence on rank; mk builds the diagnostic of the
// first. It returns the group.
func (fo *fold) add(key string, rank int, mk func() diag.Diagnostic) *foldGroup {
	if fo.byKey == nil {
		fo.byKey = map[string]*foldGroup{}
	}
	if g := fo.byKey[key]; g != nil {
		g.ranks[rank] = true
		g.more++
		return g
	}
	g := &foldGroup{f: finding{d: mk(), key: key}, ranks: map[int]bool{rank: true}}
	fo.byKey[key] = g
	fo.groups = append(fo.groups, g)
	return g
}

// moreRanks words how many more ranks (or, on one rank, places) a
// group's first occurrence stands for: " (and on 3 more ranks)", or
// what, counted, when every occurrence is on one rank.
func (g *foldGroup) moreRanks(what string) string {
	if n := len(g.ranks) - 1; n > 0 {
		return fmt.Sprintf(" (and on %d more rank%s)", n, plural(n))
	}
	if g.more > 0 {
		return fmt.Sprintf(" (and %d more %s)", g.more, pluralWord(what, g.more))
	}
	return ""
}

// findings words one run's report as diagnostics at the DSL statements sm
// maps its ops to (plan paths when sm is nil), folded by what they say:
// the same race, deadlock, unbalanced signal, wrong result or clobbered
// input at the same statements on several ranks, byte ranges or launches
// is one finding.
func findings(rep *cpu.Report, sm *SourceMap, run string) []finding {
	var out []finding
	at := func(pl cpu.Place) (dsl.Range, string) {
		if r, ok := sm.Range(pl.Rank, pl.Block, pl.Op, pl.Inner); ok {
			return r, fmt.Sprintf("%s at %s", pl, r.Start)
		}
		return sm.header(), pl.String()
	}
	// where keys a place by its statement (and op), so that the same
	// statement on every rank is one key; without a source position the
	// op's plan path (which names the rank) is the key.
	where := func(pl cpu.Place) string {
		if pl.Block < 0 {
			return "host" // a rank's host between launches, on every rank alike
		}
		if r, ok := sm.Range(pl.Rank, pl.Block, pl.Op, pl.Inner); ok {
			return fmt.Sprintf("%v/%s", r.Start, pl.OpName)
		}
		return pl.String()
	}

	var dl fold
	for _, s := range rep.Deadlocks {
		g := dl.add("deadlock|"+where(s.Place), s.Rank, func() diag.Diagnostic {
			r, w := at(s.Place)
			return diag.Diagnostic{Code: diag.CodeDeadlock, Summary: fmt.Sprintf("deadlock: rank %d block %d waits forever (%s)", s.Rank, s.Block, s.Waiting),
				Detail: fmt.Sprintf("stuck op %s; run %s", w, run), Subject: r}
		})
		if g.more > 0 {
			g.others = append(g.others, fmt.Sprintf("rank %d block %d", s.Rank, s.Block))
		}
	}
	for _, g := range dl.groups {
		if n := len(g.others); n > 0 {
			g.f.d.Summary += fmt.Sprintf(" (and %d more block%s stuck here)", n, plural(n))
			g.f.d.Detail = strings.Replace(g.f.d.Detail, "; run ", "; also stuck here: "+listSome(g.others, 4)+"; run ", 1)
		}
		out = append(out, g.f)
	}

	var races fold
	for _, rc := range rep.Races {
		a, b := rc.A, rc.B
		// The pair is unordered both ways: name it from an access with a
		// statement (a host's read between launches has none), the one
		// that comes first, so the same race seen from either side (on
		// different ranks) is one finding, placed in the program.
		_, sa := sm.Range(a.Rank, a.Block, a.Op, a.Inner)
		_, sb := sm.Range(b.Rank, b.Block, b.Op, b.Inner)
		if ra, rb := placeStart(sm, a.Place), placeStart(sm, b.Place); (sb && !sa) || (sa == sb && before(rb, ra)) {
			a, b = b, a
		}
		key := fmt.Sprintf("race|%s|%s %s|%s %s", a.Buffer, rw(a.Write), where(a.Place), rw(b.Write), where(b.Place))
		races.add(key, a.BufferRank, func() diag.Diagnostic {
			ra, wa := at(a.Place)
			_, wb := at(b.Place)
			// The missing step, where the ops around the pair show it,
			// comes first: it is what to change.
			fix := ""
			if rc.Cause.Kind != 0 {
				fix = rc.Cause.Fix(func(pl cpu.Place) string {
					if r, ok := sm.Range(pl.Rank, pl.Block, pl.Op, pl.Inner); ok {
						return "at " + r.Start.String()
					}
					return "at " + pl.Path()
				}) + "; "
			}
			return diag.Diagnostic{Code: diag.CodeRace, Summary: fmt.Sprintf("race on rank %d's %s bytes [%d:%d)", a.BufferRank, a.Buffer.Long(), max(a.Off, b.Off), min(a.End, b.End)),
				Detail: fmt.Sprintf("%s%s %s; unordered with %s %s; run %s", fix, rw(a.Write), wa, rw(b.Write), wb, run), Subject: ra}
		})
	}
	for _, g := range races.groups {
		g.f.d.Summary += g.moreRanks("byte range")
		out = append(out, g.f)
	}

	var unb fold
	for _, u := range rep.Unbalanced {
		unb.add("unbalanced|"+where(u.Place), u.Rank, func() diag.Diagnostic {
			r, w := at(u.Place)
			return diag.Diagnostic{Code: diag.CodeUnbalanced, Summary: fmt.Sprintf("signal never waited for (%s, %d token(s) left)", u.Channel, u.Count),
				Detail: fmt.Sprintf("%s; add the matching wait on the peer or drop the signal", w), Subject: r}
		})
	}
	for _, g := range unb.groups {
		g.f.d.Summary += g.moreRanks("signal")
		out = append(out, g.f)
	}

	// Wrong results are reported at the statement whose op last wrote the
	// element (the one that wrote the wrong thing, or should have added
	// what is missing), in words when the symbolic run decoded them.
	writer := func(w *cpu.Place, launch int) (dsl.Range, string, string) {
		if w == nil {
			return sm.header(), "", "none"
		}
		r, s := at(*w)
		return r, fmt.Sprintf("; last written by %s in launch %d", s, launch), where(*w)
	}
	var wrong fold
	for _, f := range rep.Findings {
		r, by, wk := writer(f.Writer, f.WriterLaunch)
		if f.Reader != nil && (f.Writer == nil || where(*f.Reader) != wk) {
			// The read of bytes this launch had not written is the
			// mistake; the writer only carried its data to the output.
			var rd string
			r, rd = at(*f.Reader)
			by = fmt.Sprintf("; read by %s from scratch bytes no op of this launch had written yet%s", rd, strings.Replace(by, "; last written by", ", then carried to the output by", 1))
			wk = where(*f.Reader)
		}
		key := "wrong|" + launchNum().ReplaceAllString(ownRank().ReplaceAllString(f.Explain, "${1}#"), "${1}#") + "|" + wk
		wrong.add(key, f.Rank, func() diag.Diagnostic {
			what := f.Explain
			if what == "" {
				what = fmt.Sprintf("rank %d output bytes [%d:%d) differ from the collective's definition", f.Rank, f.Off, f.End)
			}
			return diag.Diagnostic{Code: diag.CodeWrongResult, Summary: "wrong result: " + what,
				Detail: fmt.Sprintf("rank %d output bytes [%d:%d), %d elements, launch %d%s; %d wrong elements in all; run %s", f.Rank, f.Off, f.End, f.Elems, f.Launch, by, rep.WrongTotal, run), Subject: r}
		})
	}
	for i, g := range wrong.groups {
		if i == 3 {
			break // the first few say enough; the total is in the detail
		}
		if n := len(g.ranks) - 1; n > 0 {
			g.f.d.Summary += fmt.Sprintf(" (and on %d more rank%s)", n, plural(n))
		}
		out = append(out, g.f)
	}
	if len(rep.Findings) == 0 {
		for i, m := range rep.Wrong {
			if i == 3 {
				break
			}
			r, by, _ := writer(m.Writer, m.WriterLaunch)
			d := diag.Diagnostic{Code: diag.CodeWrongResult, Summary: fmt.Sprintf("wrong result: rank %d output byte %d is %s, want %s (launch %d)", m.Rank, m.Off, m.Got, m.Want, m.Launch),
				Detail: fmt.Sprintf("%d wrong elements in all%s; run %s", rep.WrongTotal, by, run), Subject: r}
			out = append(out, finding{d: d, key: fmt.Sprintf("wrong|%d", i)})
		}
	}

	var clob fold
	for _, c := range rep.Clobbered {
		r, by, wk := writer(c.Writer, c.Launch)
		clob.add("clobber|"+wk, c.Rank, func() diag.Diagnostic {
			return diag.Diagnostic{Code: diag.CodeInputClobbered, Summary: fmt.Sprintf("input clobbered: rank %d's input bytes [%d:%d) changed, but an out-of-place collective must leave its input as it found it", c.Rank, c.Off, c.End),
				Detail: fmt.Sprintf("%d input bytes changed in all%s; write to scratch or the output instead; run %s", rep.ClobberedBytes, by, run), Subject: r}
		})
	}
	for i, g := range clob.groups {
		if i == 3 {
			break
		}
		g.f.d.Summary += g.moreRanks("byte range")
		out = append(out, g.f)
	}
	if len(out) == 0 && !rep.OK() {
		d := diag.Diagnostic{Code: verdictCode(rep.Verdict), Summary: "verdict: " + rep.Verdict.String(), Detail: run, Subject: sm.header()}
		out = append(out, finding{d: d, key: "verdict|" + rep.Verdict.String()})
	}
	return out
}

func reportDiags(rep *cpu.Report, sm *SourceMap, run string) Diagnostics {
	fs := findings(rep, sm, run)
	ds := make(Diagnostics, len(fs))
	for i, f := range fs {
		ds[i] = f.d
	}
	return ds
}

// placeStart is where pl's statement starts (the header's position
// when it has none).
func placeStart(sm *SourceMap, pl cpu.Place) dsl.Pos {
	if r, ok := sm.Range(pl.Rank, pl.Block, pl.Op, pl.Inner); ok {
		return r.Start
	}
	return sm.header().Start
}

// before orders source positions; a position without a line (a plan
// path's header) comes first.
func before(a, b dsl.Pos) bool {
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Col < b.Col
}

// listSome lists at most n items and counts the rest.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// ownRank matches the part of an explanation that names the rank whose
// output it is about (its own poisoned output bytes), which differs
// between ranks that are otherwise wrong the same way.
// Compiled on first use (only a wrong plan's report needs it), not at
// package init, which every msccl-compile process pays, even --version.
var ownRank = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(poison from rank )[0-9]+`) })

// launchNum matches launch numbers in an explanation ("stale: rank 0's
// input from launch 1 in launch 2"): the same mistake in every launch
// words them differently, and is reported once, at its first launch.
var launchNum = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(launch )[0-9]+`) })

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// pluralWord is word, in the plural when n is not 1.
func pluralWord(word string, n int) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
