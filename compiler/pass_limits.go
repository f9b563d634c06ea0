package compiler

import (
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// checkLimits validates the finished plan (structure, channel pairing and
// the upstream executor's limits: ops per block, channels per block and
// op, buffer refs per op) and reports each problem at the DSL statement
// that produced the offending op, with a hint at the usual fix.
func checkLimits(st *state) {
	if st.explicit {
		st.checkBalance()
	}
	for _, d := range ir.Validate(st.plan) {
		sev := dsl.Error
		if d.Severity == ir.SevWarning {
			sev = dsl.Warning
		}
		hint := ""
		switch {
		case strings.Contains(d.Msg, "per block"):
			hint = "spread the work over more thread blocks (`tb` clauses) or fewer steps per block"
		case strings.Contains(d.Msg, "per type"):
			hint = "give each group of peers its own thread block"
		}
		st.diags = append(st.diags, dsl.Diagnostic{Severity: sev, Summary: fmt.Sprintf("plan %s: %s", d.Path, d.Msg), Detail: hint,
			Subject: st.sm.rangeOfPath(d.Path, st.file.Filename)})
	}
}

// checkBalance counts, for a channel-level program, the signals sent on
// each channel against the waits on its partner, and reports the ops of a
// side with no counterpart at their source lines: the usual mistake of a
// hand-written schedule.
func (st *state) checkBalance() {
	type end struct {
		pair  chanPair
		rankA bool // the signalling end is pair.rankA
	}
	count := map[end][2]int{} // signals, waits
	first := map[end][2]dsl.Range{}
	var visit func(a *action)
	visit = func(a *action) {
		for _, in := range a.body() {
			visit(in)
		}
		var slot int
		switch a.code {
		case ir.OpSignal, ir.OpRlxSignal, ir.OpPws, ir.OpPwsf:
			slot = 0
		case ir.OpWait, ir.OpRlxWait:
			slot = 1
		default:
			return
		}
		for _, k := range a.chanList() {
			// The signal travels from a.rank; the matching wait sits on the
			// other end, which waits for tokens from a.rank's side.
			e := end{pair: k, rankA: (int(k.rankA) == a.rank) == (slot == 0)}
			c := count[e]
			c[slot]++
			count[e] = c
			f := first[e]
			if !f[slot].Start.IsValid() {
				f[slot] = *a.pos
			}
			first[e] = f
		}
	}
	for _, a := range st.actions {
		visit(a)
	}
	var ends []end
	for e := range count {
		ends = append(ends, e)
	}
	sortEnds := func(i, j int) bool {
		a, b := first[ends[i]], first[ends[j]]
		pa, pb := a[0].Start, b[0].Start
		if !pa.IsValid() {
			pa = a[1].Start
		}
		if !pb.IsValid() {
			pb = b[1].Start
		}
		return pa.Offset < pb.Offset
	}
	for i := 1; i < len(ends); i++ {
		for j := i; j > 0 && sortEnds(j, j-1); j-- {
			ends[j], ends[j-1] = ends[j-1], ends[j]
		}
	}
	for _, e := range ends {
		c, f := count[e], first[e]
		from, fromTB, to, toTB := e.pair.rankA, e.pair.tbA, e.pair.rankB, e.pair.tbB
		if !e.rankA {
			from, fromTB, to, toTB = to, toTB, from, fromTB
		}
		switch {
		case c[0] > c[1]:
			st.errorf(f[0], fmt.Sprintf("rank %d tb %d signals rank %d tb %d %d time(s) but that block waits %d time(s); add `wait to %d@%d` there (or drop the signal)", from, fromTB, to, toTB, c[0], c[1], from, fromTB),
				"signal with no matching wait")
		case c[1] > c[0]:
			st.errorf(f[1], fmt.Sprintf("rank %d tb %d waits for rank %d tb %d %d time(s) but that block signals %d time(s); the wait would hang", to, toTB, from, fromTB, c[1], c[0]),
				"wait with no matching signal")
		}
	}
}
