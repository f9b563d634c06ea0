package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// checkLimits validates the finished plan (structure, channel pairing and
// the upstream executor's limits: ops per block, channels per block and
// op, buffer refs per op) and reports each problem at the DSL statement
// that produced the offending op. A limit exceeded the same way on many
// ranks (the usual case: every rank runs the same loop) is one diagnostic.
func checkLimits(st *state, b *built) {
	if b.explicit {
		checkBalance(st, b.acts)
	}
	var hits []limitHit
	for _, d := range ir.Validate(b.plan) {
		if d.IsError() && d.IsLimit() {
			hits = append(hits, st.limitHit(d, b))
			continue
		}
		// The plan's finding, placed at the statement behind it; its code
		// stays the plan's.
		st.diags = append(st.diags, diag.Diagnostic{Severity: d.Severity, Code: d.Code, Summary: fmt.Sprintf("plan %s: %s", d.Path, d.Summary),
			Subject: b.sm.rangeOfPath(d.Path, st.file.Filename)})
	}
	st.reportLimits(hits)
}

// limitHit is one limit exceeded in one block, worded without its rank
// and block so that the same excess elsewhere folds into it.
type limitHit struct {
	rank, block int
	at          dsl.Range
	count       int
	// what follows "rank R tb B" (" uses {n} memory channels; ..." or
	// ": signal names {n} channels; ..."), with {n} for the count: blocks
	// whose counts differ fold too, the count becoming a range.
	what   string
	detail string
	// code and max are the ir diagnostic's, kept on the folded one.
	code string
	max  int
}

// limitHit places and words an ir limit diagnostic from its code, count
// and path; the ir message is prose and not read here.
func (st *state) limitHit(d ir.Diagnostic, b *built) limitHit {
	pp := parsePlanPath(d.Path)
	h := limitHit{rank: pp.rank, block: pp.block, count: d.Count, code: d.Code, max: d.Max}
	var tb *ir.ThreadBlock
	if pp.rank >= 0 && pp.rank < len(b.plan.GPUs) && pp.block >= 0 && pp.block < len(b.plan.GPUs[pp.rank].ThreadBlocks) {
		tb = &b.plan.GPUs[pp.rank].ThreadBlocks[pp.block]
	}
	// The op the excess is charged to: the offending op itself, or for a
	// block's tables the first op past them.
	op, inner := pp.op, pp.inner
	split := "split the loop over blocks with `tb`, or let automatic assignment do it (leave `tb` out)"
	if b.explicit {
		split = "move part of this work to another `on rank(r) tb N` block"
	}
	name := "op"
	if o := opAt(tb, op, inner); o != nil {
		name = o.Info().Name
	}
	switch d.Code {
	case diag.CodeOpsPerBlock:
		op, inner = nthOp(tb, d.Max)
		bodies := ""
		if tb != nil && slices.ContainsFunc(tb.Ops, func(o ir.Op) bool { return o.Code == ir.OpPipeline }) {
			bodies = " counting pipeline bodies"
		}
		h.what = fmt.Sprintf(" has {n} ops%s; the upstream executor holds at most %d per block", bodies, d.Max)
		h.detail = fmt.Sprintf("op %d, the first past the limit, comes from here; %s", d.Max+1, split)
	case diag.CodeChannelsPerBlock:
		t := tableType(tb, pp.rest, ".channels")
		op, inner = firstOp(tb, func(o *ir.Op) bool { return usesChannel(o, t, d.Max) })
		h.what = fmt.Sprintf(" uses {n} %s channels; the upstream executor holds at most %d per type per block", t, d.Max)
		h.detail = fmt.Sprintf("%s channel %d of the block; %s", usedHere(op), d.Max+1, split)
	case diag.CodeRemoteBuffersPerBlock:
		t := tableType(tb, pp.rest, ".remote_buffer_refs")
		op, inner = firstOp(tb, func(o *ir.Op) bool { return usesRemote(o, t, d.Max) })
		h.what = fmt.Sprintf(" uses {n} remote buffers over %s channels; the upstream executor holds at most %d per type per block", t, d.Max)
		h.detail = fmt.Sprintf("%s remote buffer %d of the block; %s", usedHere(op), d.Max+1, split)
	case diag.CodeChannelsPerOp:
		h.what = fmt.Sprintf(": %s names {n} channels; the upstream executor holds at most %d per op", name, d.Max)
		h.detail = fmt.Sprintf("give it at most %d peers and the rest to another op", d.Max)
	case diag.CodeRefsPerOp:
		key := "src_buff"
		if strings.HasPrefix(pp.rest, ".dst_buff") {
			key = "dst_buff"
		}
		h.what = fmt.Sprintf(": %s has {n} %s refs; the upstream executor holds at most %d per op", name, key, d.Max)
		h.detail = fmt.Sprintf("split it into ops of at most %d %s refs (a reduce in two steps: part of the sources into the destination, then the rest)", d.Max, key)
	case diag.CodeSemaphoresPerOp:
		h.what = fmt.Sprintf(": %s names {n} semaphores; the upstream executor holds at most %d per op", name, d.Max)
		h.detail = fmt.Sprintf("split it into %s ops of at most %d semaphores each", name, d.Max)
	}
	h.at = b.sm.header()
	if rg, ok := b.sm.lookup(pp.rank, pp.block, op, inner); ok {
		h.at = rg
	} else if rg, ok := b.sm.lookup(pp.rank, pp.block, 0, -1); ok {
		// No op to charge (a channel in the table that no op uses): the
		// block's first statement still names the block's loop.
		h.at = rg
	}
	if !h.at.Start.IsValid() && h.at.Start.Filename == "" {
		h.at = dsl.Range{Start: dsl.Pos{Filename: st.file.Filename}}
	}
	return h
}

// reportLimits folds hits that differ only in rank and block into one
// diagnostic at their statement, naming the first and counting the rest.
func (st *state) reportLimits(hits []limitHit) {
	type key struct {
		at           dsl.Range
		what, detail string
		code         string
	}
	var order []key
	groups := map[key][]limitHit{}
	for _, h := range hits {
		k := key{h.at, h.what, h.detail, h.code}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], h)
	}
	for _, k := range order {
		g := groups[k]
		first := g[0]
		lo, hi := first.count, first.count
		for _, h := range g {
			lo, hi = min(lo, h.count), max(hi, h.count)
		}
		n := fmt.Sprint(lo)
		if hi > lo {
			n = fmt.Sprintf("%d to %d", lo, hi)
		}
		// The fold goes next to the block it extends, so that a count
		// range reads as the group's.
		where := fmt.Sprintf("rank %d tb %d", first.rank, first.block)
		if len(g) > 1 {
			ranks := map[int]bool{}
			for _, h := range g {
				ranks[h.rank] = true
			}
			if len(ranks) == len(g) {
				where += fmt.Sprintf(" (and %s)", countNoun(len(g)-1, "more rank"))
			} else {
				where += fmt.Sprintf(" (and %s on %s)", countNoun(len(g)-1, "more block"), countNoun(len(ranks), "rank"))
			}
		}
		summary := where + strings.Replace(k.what, "{n}", n, 1)
		st.diags = append(st.diags, diag.Diagnostic{Severity: diag.Error, Code: k.code, Summary: summary, Detail: k.detail, Subject: k.at,
			Count: hi, Max: first.max})
	}
}

// countNoun writes "1 more rank", "3 more ranks".
func countNoun(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// usedHere starts the detail of a table overflow: the statement the
// diagnostic is at either uses the entry past the table or, when no op
// does, only heads the block.
func usedHere(op int) string {
	if op < 0 {
		return "the block's table lists, though no op uses,"
	}
	return "this statement uses"
}

// opAt returns op (inner: index in its pipeline body, or -1) of tb.
func opAt(tb *ir.ThreadBlock, op, inner int) *ir.Op {
	if tb == nil || op < 0 || op >= len(tb.Ops) {
		return nil
	}
	o := &tb.Ops[op]
	if inner < 0 {
		return o
	}
	body := o.Ops()
	if inner >= len(body) {
		return nil
	}
	return &body[inner]
}

// nthOp finds the op at position n (0-based) of tb counting pipeline
// bodies as upstream flattens them; -1 when tb is shorter.
func nthOp(tb *ir.ThreadBlock, n int) (op, inner int) {
	if tb == nil {
		return -1, -1
	}
	k := 0
	for i := range tb.Ops {
		if k == n {
			return i, -1
		}
		k++
		if tb.Ops[i].Code == ir.OpPipeline {
			body := tb.Ops[i].Ops()
			if n-k < len(body) {
				return i, n - k
			}
			k += len(body)
		}
	}
	return -1, -1
}

// firstOp finds the first op of tb, pipeline bodies included, that f
// accepts.
func firstOp(tb *ir.ThreadBlock, f func(*ir.Op) bool) (op, inner int) {
	if tb == nil {
		return -1, -1
	}
	for i := range tb.Ops {
		if f(&tb.Ops[i]) {
			return i, -1
		}
		for j := range tb.Ops[i].Ops() {
			if f(&tb.Ops[i].Ops()[j]) {
				return i, j
			}
		}
	}
	return -1, -1
}

// tableType reads the channel type of the table entry rest points into
// (".channels[K]..." or ".remote_buffer_refs[K]...").
func tableType(tb *ir.ThreadBlock, rest, key string) ir.ChannelType {
	k, _, ok := pathIndex(rest, key)
	if tb == nil || !ok {
		return ir.ChanNone
	}
	switch {
	case key == ".channels" && k < len(tb.Channels):
		return tb.Channels[k].Type
	case key == ".remote_buffer_refs" && k < len(tb.RemoteBufferRefs):
		return tb.RemoteBufferRefs[k].AccessChannelType
	}
	return ir.ChanNone
}

// usesChannel reports whether o names a block-local channel of type t at
// index limit or above (one the executor's table has no room for).
func usesChannel(o *ir.Op, t ir.ChannelType, limit int) bool {
	if o.ChannelType == t && slices.ContainsFunc(o.ChannelIDs, func(id int) bool { return id >= limit }) {
		return true
	}
	if t != ir.ChanSwitch {
		return false
	}
	past := func(r ir.BufRef) bool { return r.Kind == ir.RefSwitch && r.SwitchID >= limit }
	return slices.ContainsFunc(o.Src, past) || slices.ContainsFunc(o.Dst, past)
}

// usesRemote is usesChannel for the block's remote buffer table.
func usesRemote(o *ir.Op, t ir.ChannelType, limit int) bool {
	if o.ChannelType != t {
		return false
	}
	past := func(r ir.BufRef) bool { return r.Kind == ir.RefRemote && r.BufferID >= limit }
	return slices.ContainsFunc(o.Src, past) || slices.ContainsFunc(o.Dst, past)
}

// checkBalance counts, for a channel-level program, the signals sent on
// each channel against the waits on its partner, and reports the ops of a
// side with no counterpart at their source lines: the usual mistake of a
// hand-written schedule.
func checkBalance(st *state, acts []*action) {
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
	for _, a := range acts {
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
