package ir

import (
	"fmt"
	"math"
)

// SizeRule is the set of message sizes (bytes as nccl-tests counts them)
// a plan serves: multiples of Granularity from Min to Max inclusive. Every
// entry point (the executors, the Go API, the tools) refuses a size
// outside it, because outside it the chunk geometry makes some op move a
// different number of bytes than its operands hold, and the result is
// wrong or undefined.
//
// Why the rule has this shape: with S the reference buffer's size, A the
// alignment, N its chunk count and u = S/A = qN + r, chunk c (c < N) holds
// q+1 units when c < r and q otherwise, and every chunk c >= N (scratch
// beyond the reference) holds q. An op that moves chunk i of one buffer
// to chunk j of another is therefore consistent exactly when c < r is the
// same for both, which depends on r alone. SizeRule collects, over every
// op, the residues r that break some op; the sizes left are those whose r
// is a multiple of Step (the largest set of residues closed under the
// chunk split that avoids every broken one). At those sizes every op is a
// chunk-for-chunk relabelling whatever q is, which is what lets the proof
// cover all of them from a few (docs/rationale.md, "Why a few sizes prove
// all of them").
type SizeRule struct {
	Granularity int64 // message sizes are multiples of this
	Min, Max    int64 // inclusive; Max is math.MaxInt64 when unbounded

	Align  int64 // the plan's buffer alignment
	Chunks int64 // N: chunks of the reference buffer
	Step   int64 // admitted residues u mod N are the multiples of Step
	// Ref is the reference buffer (input, or output when the input has
	// no chunks); message bytes = Ref bytes * RefMul / RefDiv.
	Ref            BufferType
	RefMul, RefDiv int64
	// Fragile names what constrained Step (an op's JSON path and why, or
	// the collective's definition), so a user learns what limits the
	// sizes; empty when every residue is admitted.
	Fragile string
}

// String states the rule briefly: "multiples of 128 bytes from 128 bytes".
func (r SizeRule) String() string {
	s := fmt.Sprintf("multiples of %d bytes from %d bytes", r.Granularity, r.Min)
	if r.Max != math.MaxInt64 {
		s += fmt.Sprintf(" up to %d bytes", r.Max)
	}
	return s
}

// Why says where the granularity comes from, for errors.
func (r SizeRule) Why() string {
	switch {
	case r.Step == 1:
		return fmt.Sprintf("%d-byte alignment; %d chunks of at least one unit each", r.Align, r.Chunks)
	case r.Step == r.Chunks:
		return fmt.Sprintf("the %s must split evenly into %d chunks of %d-byte units, because %s", r.Ref.Long(), r.Chunks, r.Align, r.Fragile)
	}
	return fmt.Sprintf("the %s's %d-byte units modulo its %d chunks must be a multiple of %d, because %s", r.Ref.Long(), r.Align, r.Chunks, r.Step, r.Fragile)
}

// Admits reports whether msg is in the rule.
func (r SizeRule) Admits(msg int64) bool {
	return msg >= r.Min && msg <= r.Max && r.Granularity > 0 && msg%r.Granularity == 0
}

// Check returns an error naming the rule when msg is outside it.
func (r SizeRule) Check(msg int64) error {
	if r.Admits(msg) {
		return nil
	}
	return &SizeError{Size: msg, Rule: r}
}

// SizeError is a message size outside a plan's size rule.
type SizeError struct {
	Size int64
	Rule SizeRule
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("message size %d bytes is outside the plan's size rule: %s (%s)", e.Size, e.Rule, e.Rule.Why())
}

// Next returns the smallest admitted size >= msg, or false when none.
func (r SizeRule) Next(msg int64) (int64, bool) {
	msg = max(msg, r.Min)
	if rem := msg % r.Granularity; rem != 0 {
		if msg > math.MaxInt64-r.Granularity {
			return 0, false
		}
		msg += r.Granularity - rem
	}
	return msg, msg <= r.Max
}

// refMul returns how many message bytes a byte of buffer t stands for, as
// a ratio: message = bytes * mul / div (nccl-tests counts allgather and
// gather by their output and everything else by its input).
func (p *Plan) refMul(t BufferType) (mul, div int64) {
	n := int64(len(p.GPUs))
	switch {
	case p.Collective.Gathers() && t == BufInput:
		return n, 1
	case p.Collective.Scatters() && t == BufOutput:
		return n, 1
	}
	return 1, 1
}

// SizeRule derives the plan's size rule from its chunk geometry and
// narrows it by the plan's own min/max_message_size and size_granularity.
// It fails when no size at all is consistent (an op whose operands cover
// different chunk counts) or the ranks disagree on the reference geometry.
func (p *Plan) SizeRule() (SizeRule, error) {
	if len(p.GPUs) == 0 {
		return SizeRule{}, fmt.Errorf("plan has no gpus")
	}
	a := int64(p.BufferAlignment)
	if a <= 0 {
		return SizeRule{}, fmt.Errorf("buffer_alignment must be positive, got %d", a)
	}
	g0 := &p.GPUs[0]
	ref, n := BufInput, int64(g0.InputChunks)
	if n == 0 {
		ref, n = BufOutput, int64(g0.OutputChunks)
	}
	if n <= 0 {
		return SizeRule{}, fmt.Errorf("gpus[0]: input_chunks and output_chunks are both 0")
	}
	for r := range p.GPUs {
		g := &p.GPUs[r]
		rt, rn := BufInput, int64(g.InputChunks)
		if rn == 0 {
			rt, rn = BufOutput, int64(g.OutputChunks)
		}
		if rt != ref || rn != n {
			return SizeRule{}, fmt.Errorf("gpus[%d]: reference buffer is %s with %d chunks, but gpus[0]'s is %s with %d: the ranks' chunk geometries differ, so no message size is known to be consistent", r, rt.Long(), rn, ref.Long(), n)
		}
	}
	w := &ruleWalk{p: p, n: n, forbid: make([]int32, n+2)}
	for r := range p.GPUs {
		for b := range p.GPUs[r].ThreadBlocks {
			tb := &p.GPUs[r].ThreadBlocks[b]
			for i := range tb.Ops {
				w.op(r, b, &tb.Ops[i], opPath{r: r, b: b, i: i})
			}
			if w.err != nil {
				return SizeRule{}, w.err
			}
		}
	}
	w.definition(g0)
	forbid, fragile := w.forbid, w.fragile
	bad := make([]bool, n)
	run := int32(0)
	for r := int64(0); r < n; r++ {
		run += forbid[r]
		bad[r] = run > 0 && r > 0
	}
	step := n
	for d := int64(1); d <= n; d++ {
		if n%d != 0 {
			continue
		}
		ok := true
		for r := d; r < n; r += d {
			if bad[r] {
				ok = false
				break
			}
		}
		if ok {
			step = d
			break
		}
	}
	if step == 1 {
		fragile = ""
	}
	mul, div := p.refMul(ref)
	// Reference bytes are multiples of A*step and at least N*A; the other
	// buffer must be a multiple of A too.
	other := BufOutput
	if ref == BufOutput {
		other = BufInput
	}
	omul, odiv := p.refMul(other)
	gref := a * step * mul / div
	goth := a * omul / odiv
	gran := lcm(gref, goth)
	if p.Collective.Gathers() || p.Collective.Scatters() {
		gran = lcm(gran, int64(len(p.GPUs)))
	}
	rule := SizeRule{Granularity: gran, Align: a, Chunks: n, Step: step, Ref: ref, RefMul: mul, RefDiv: div, Fragile: fragile, Max: math.MaxInt64}
	min := n * a * mul / div
	if p.MaxMessageSize != math.MaxUint64 && p.MaxMessageSize < math.MaxInt64 {
		rule.Max = int64(p.MaxMessageSize)
	}
	if pg := int64(p.SizeGranularity); pg > 0 {
		rule.Granularity = lcm(rule.Granularity, pg)
	}
	if pm := p.MinMessageSize; pm > uint64(min) && pm < math.MaxInt64 {
		min = int64(pm)
	}
	rule.Min = 0
	m, ok := rule.Next(max(min, 1))
	if !ok {
		return rule, fmt.Errorf("no message size fits the plan: the smallest multiple of %d bytes from %d bytes is above max_message_size %d", rule.Granularity, min, rule.Max)
	}
	rule.Min = m
	return rule, nil
}

// definition bans the residues at which the collective's own definition
// pairs chunks of different lengths: allgather's output chunk q*C+c is
// rank q's input chunk c, reducescatter's output chunk c is input chunk
// r*C+c, alltoall's output chunk q*C+c is rank q's input chunk r*C+c.
// Ops alone cannot show this: a chunk that goes through a uniform scratch
// slot on its way keeps its identity (the proof checks that) but arrives
// in a chunk of another length, so the sizes where the definition's
// chunks differ are outside the rule whatever the ops do.
func (w *ruleWalk) definition(g *GPU) {
	w.defining = true
	n := int64(len(w.p.GPUs))
	in, out := int64(g.InputChunks), int64(g.OutputChunks)
	// pair bans and reports whether the caller is to name the reason.
	pair := func(i, j int64) bool {
		lo, hi := min(i, j), min(max(i, j), w.n)
		return i != j && lo < w.n && lo < hi && w.ban(lo+1, hi)
	}
	switch c := w.p.Collective; {
	case c.Gathers() && in > 0:
		for q := int64(1); q < n; q++ {
			for k := int64(0); k < in; k++ {
				if pair(k, q*in+k) {
					w.fragile = fmt.Sprintf("%s puts rank %d's input chunk %d in output chunk %d", c, q, k, q*in+k)
				}
			}
		}
	case c.Scatters() && out > 0:
		for r := int64(1); r < n; r++ {
			for k := int64(0); k < out; k++ {
				if pair(k, r*out+k) {
					w.fragile = fmt.Sprintf("%s gives rank %d input chunk %d as its output chunk %d", c, r, r*out+k, k)
				}
			}
		}
	case c == AllToAll:
		per := in / max(n, 1)
		for r := int64(0); r < n; r++ {
			for q := int64(0); q < n; q++ {
				for k := int64(0); k < per; k++ {
					if pair(q*per+k, r*per+k) {
						w.fragile = fmt.Sprintf("alltoall puts rank %d's input chunk %d in rank %d's output chunk %d", q, r*per+k, r, q*per+k)
					}
				}
			}
		}
	}
}

// ruleWalk collects, over the ops of a plan, the residues u mod N at
// which some op's operands cover different byte counts.
type ruleWalk struct {
	p       *Plan
	n       int64
	forbid  []int32 // difference array over residues
	fragile string  // the first op that forbade residue 1, or any
	// defining: the definition's pairs are being added (they name the
	// reason only when no op did).
	defining bool
	err      error
}

// ban forbids residues [lo, hi] (clipped to 1..n-1) and reports whether
// the caller is to name the reason in w.fragile. The reason is worded
// only then: a plan's walk bans at most a few residues per op, and
// formatting every one of them cost a compile more than its walk
// (msccl-compile's 8-rank compile, docs/BENCHMARKS.md).
func (w *ruleWalk) ban(lo, hi int64) bool {
	lo, hi = max(lo, 1), min(hi, w.n-1)
	if lo > hi {
		return false
	}
	w.forbid[lo]++
	w.forbid[hi+1]--
	// An op that forces the split is named before the definition: it is
	// what the author can change.
	return w.fragile == "" || (lo == 1 && !w.defining)
}

// opPath is an op's JSON path, worded only for a reason or an error:
// gpus[r].threadblocks[b].ops[i], then .ops[i] for each pipeline it is in.
type opPath struct {
	outer   *opPath
	r, b, i int
}

func (p *opPath) String() string {
	if p.outer != nil {
		return fmt.Sprintf("%s.ops[%d]", p.outer.String(), p.i)
	}
	return fmt.Sprintf("gpus[%d].threadblocks[%d].ops[%d]", p.r, p.b, p.i)
}

// bufType resolves the buffer a reference names; ok is false when the
// plan does not say (the validator reports that).
func (w *ruleWalk) bufType(r, b int, op *Op, br *BufRef) (BufferType, bool) {
	switch br.Kind {
	case RefLocal:
		return br.Type, true
	case RefRemote:
		tb := &w.p.GPUs[r].ThreadBlocks[b]
		ids := tb.RemoteTable(op.ChannelType)
		if br.BufferID < 0 || br.BufferID >= len(ids) {
			return BufNone, false
		}
		rbs := w.p.GPUs[r].RemoteBuffers
		if id := ids[br.BufferID]; id >= 0 && id < len(rbs) {
			return rbs[id].Type, true
		}
	}
	return BufNone, false
}

// op records the residues at which op's operands cover different byte
// counts. Chunk i paired with chunk j (i < j, both clamped to N) differ
// for residues in (i, j]. With uniform scratch a slot holds any chunk and
// the op moves its data operands' bytes, so a scratch operand constrains
// only where a multi-chunk data range must keep its chunk boundaries on
// slot boundaries (every chunk but the last of full length), and packet
// ops between scratch slots alone (they would wait for packets beyond a
// short chunk) need an even split.
func (w *ruleWalk) op(r, b int, op *Op, at opPath) {
	if op.Code == OpPipeline {
		for k := range op.Ops() {
			w.op(r, b, &op.Ops()[k], opPath{outer: &at, i: k})
		}
		return
	}
	if len(op.Src)+len(op.Dst) < 2 || w.err != nil {
		return
	}
	uniform := w.p.UniformScratch
	packet := op.Info().Class == ClassPacket
	scratch := func(br *BufRef) bool {
		t, ok := w.bufType(r, b, op, br)
		return ok && t == BufScratch
	}
	// what names the operand pair for an error or a reason: k is the
	// index into dst (paired ops) or into src then dst.
	what := func(k int, paired bool) string {
		if paired || k >= len(op.Src) {
			if !paired {
				k -= len(op.Src)
			}
			return fmt.Sprintf("dst_buff[%d]", k)
		}
		return fmt.Sprintf("src_buff[%d]", k)
	}
	pair := func(x, y *BufRef, k int, paired bool) {
		sx, sy := uniform && scratch(x), uniform && scratch(y)
		switch {
		case sx && sy:
			if packet || op.TBG() != nil {
				if w.ban(1, w.n-1) {
					w.fragile = fmt.Sprintf("%s moves packets or a tbg slice between scratch slots only, so its length is a whole slot", at.String())
				}
			}
			return
		case sx || sy:
			d := x
			if sx {
				d = y
			}
			sr := y
			if sx {
				sr = x
			}
			if sr.Size != d.Size {
				w.err = fmt.Errorf("%s: %s pairs %d data chunks with %d scratch slots: the byte counts differ at every message size", at.String(), what(k, paired), d.Size, sr.Size)
				return
			}
			if op.TBG() != nil {
				if w.ban(1, w.n-1) {
					w.fragile = fmt.Sprintf("%s splits a scratch slot and a data range across a block group: the slices line up only when the split is even", at.String())
				}
			}
			if d.Size >= 2 {
				if w.ban(1, int64(d.Index+d.Size-2)) {
					w.fragile = fmt.Sprintf("%s pairs data chunks [%d, %d) with scratch slots: their chunk boundaries fall on slot boundaries only when all but the last chunk have the largest length", at.String(), d.Index, d.Index+d.Size)
				}
			}
			return
		}
		if x.Size != y.Size {
			w.err = fmt.Errorf("%s: %s covers %d chunks but the other operand %d: the byte counts differ at every message size", at.String(), what(k, paired), y.Size, x.Size)
			return
		}
		i, j := int64(x.Index), int64(y.Index)
		if i == j {
			return
		}
		lo, hi := min(i, j), min(max(i, j)+int64(x.Size)-1, w.n)
		if lo >= w.n || lo >= hi {
			return
		}
		if w.ban(lo+1, hi) {
			w.fragile = fmt.Sprintf("%s pairs chunk %d with chunk %d, and their lengths differ when u mod N (the units left over after an even split) is %s", at.String(), i, j, residues(lo+1, hi, w.n))
		}
	}
	if op.Info().Paired {
		if len(op.Src) == 0 {
			return // malformed; the validator says so
		}
		for k := range op.Dst {
			pair(&op.Src[min(k, len(op.Src)-1)], &op.Dst[k], k, true)
		}
		return
	}
	// Every operand against one anchor, a data operand where there is one:
	// data operands must agree with each other, scratch slots with them.
	// Operand k counts src then dst (read in place: copying them into
	// one list cost an allocation per op).
	ref := func(k int) *BufRef {
		if k < len(op.Src) {
			return &op.Src[k]
		}
		return &op.Dst[k-len(op.Src)]
	}
	all := len(op.Src) + len(op.Dst)
	anchor := 0
	for k := range all {
		if !(uniform && scratch(ref(k))) {
			anchor = k
			break
		}
	}
	for k := range all {
		if k == anchor {
			continue
		}
		pair(ref(anchor), ref(k), k, false)
	}
}

// residues words the residues [lo, hi] that ban forbids, clipped as it
// clips them: "1", "1 to 3".
func residues(lo, hi, n int64) string {
	lo, hi = max(lo, 1), min(hi, n-1)
	if lo >= hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int64) int64 {
	if a == 0 || b == 0 {
		return max(a, b)
	}
	return a / gcd(a, b) * b
}
