package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/msccl-go/msccl-go/ir"
)

// Rank consistency. A proof says every output element holds each expected
// contribution once; it does not say in which order they were combined,
// and in floating point the order decides the bits: an all-pairs one-shot
// allreduce, where every rank adds the inputs starting with its own, gives
// each rank a slightly different sum of the same numbers, while a
// two-shot, where one rank reduces each chunk and the others copy it,
// gives all of them the same bits. A training job that expects its
// replicas to stay identical needs the second kind.
//
// CheckConsistency runs the plan with reduction trees in place of values
// (consMode.trees): inputs are the symbolic proof's fingerprints; a copy
// moves a tree; a reducing op with sources s0, s1, ..., sk makes the node
// round(((s0 ⊕ s1) ⊕ s2) ... ⊕ sk), hashed so that only s0 and s1 commute
// (reducer folds sources in order in fp32 and rounds once; IEEE addition
// and multiplication commute, neither associates). Output elements that
// the collective defines as the same value (element i of every rank of an
// allreduce; the symbolic definition, i.e. the same multiset of
// contributions, is the key) must then hold the same tree for the ranks
// to receive bit-identical values in every type and reduction. Equal
// trees are sufficient; unequal ones may still agree where rounding does
// not notice (integer types, min and max, which associate; f32 sums
// whose two ops nest the way one op would fold), so "not identical"
// means "not in general for floating-point sums".
//
// The order is fixed whatever the timing unless a switch reduction
// (glres) is used, NVLink SHARP reducing in the switch in an order the
// hardware does not promise, or ops that accumulate into one element run
// in an order that only mutual exclusion decides (blocks that take turns
// through a semaphore: no race, yet whoever acquires first adds first).
// Every op lists its sources, so the second kind shows as trees that
// differ between interleavings: the trees are built again under shuffled
// schedules (consSchedules) and compared element by element. Only a
// semaphore that two blocks of a rank acquire can hand the turn to
// either (a signal is waited for on one channel, a packet by one reader,
// a barrier holds every block), so plans without one are not shuffled:
// shuffling costs a hundred times the plain run at 128 ranks.

// consMode switches a run to one of the two consistency checks: trees
// (symbolic inputs, reductions build trees) or floats (random float
// inputs, real reductions). Either replaces the result check with
// consCheck, which groups output elements by definition.
type consMode struct {
	trees bool
	found *Consistency
	seen  map[consKey]consHolder
	// ref holds the first schedule's defined outputs by (launch, rank);
	// later schedules compare against it.
	ref     map[[2]int][]byte
	compare bool
}

// consSchedules are the shuffled interleavings (Options.sched seeds) a
// trees run is repeated under, besides the round-robin one.
var consSchedules = []uint64{0x9e37, 0x85eb, 0xc2b2}

type consKey struct {
	fp  uint64 // the definition's symbolic fingerprint at the element's 8-byte word
	sub int64  // byte offset inside that word (elements narrower than 8 bytes)
}

type consHolder struct {
	at  Holder
	val string
}

// Holder names one output element: a rank and the element's byte offset
// in its output buffer.
type Holder struct {
	Rank int
	Off  int64
}

// Consistency is what a consistency run found.
type Consistency struct {
	// Identical: every group of output elements the collective defines
	// as one value holds one reduction tree (CheckConsistency) or one bit
	// pattern (CompareFloats) across all ranks.
	Identical bool
	// Fixed: the order cannot change from run to run: no op reduces in
	// the switch (Switch) and every interleaving tried built the same
	// trees (else Timing names an element that changed).
	Fixed  bool
	Switch bool
	Timing *Holder
	// Reduced: some output element combines two or more contributions;
	// without one, every output is a copy of an input and identical
	// trivially. Only CheckConsistency sets it.
	Reduced bool
	// A and B are the first two holders found to differ (when !Identical),
	// at message size Size and launch Launch.
	A, B   Holder
	Size   int64
	Launch int
}

// String is the one-line summary msccl-compile prints.
func (c *Consistency) String() string {
	order := "fixed whatever the timing"
	switch {
	case c.Switch:
		order = "not fixed: a switch reduction (glres) sums in the order the hardware chooses"
	case c.Timing != nil:
		order = fmt.Sprintf("not fixed: rank %d output byte %d is reduced in an order that depends on which block runs first", c.Timing.Rank, c.Timing.Off)
	}
	switch {
	case !c.Identical:
		return fmt.Sprintf("rank-consistent: no, %s; reduction order %s", c.Pair(), order)
	case !c.Reduced:
		return fmt.Sprintf("rank-consistent: yes, every output is a copy of an input; reduction order %s", order)
	}
	return fmt.Sprintf("rank-consistent: yes, every value the collective defines has the same bits on every rank that receives it; reduction order %s", order)
}

// Pair words the first difference found: "rank 0 output byte 0 and rank
// 2 output byte 0 are reduced in different orders (at 16 bytes)".
func (c *Consistency) Pair() string {
	return fmt.Sprintf("rank %d output byte %d and rank %d output byte %d are reduced in different orders (at %d bytes, launch %d)",
		c.A.Rank, c.A.Off, c.B.Rank, c.B.Off, c.Size, c.Launch)
}

// Err is nil for a rank-consistent plan with a fixed order and otherwise
// says why not.
func (c *Consistency) Err() error {
	switch {
	case !c.Identical:
		return fmt.Errorf("the plan is not rank-consistent: %s, so in floating point they may differ", c.Pair())
	case c.Switch:
		return fmt.Errorf("the plan is not rank-consistent: a switch reduction (glres) sums in the order the hardware chooses, which may change from run to run")
	case c.Timing != nil:
		return fmt.Errorf("the plan is not rank-consistent: rank %d output byte %d is reduced in an order that depends on which block runs first, which may change from run to run", c.Timing.Rank, c.Timing.Off)
	}
	return nil
}

// CheckConsistency runs p at each size with launches back-to-back
// launches (0 means 2) and says whether the ranks receive bit-identical
// results. It answers for a proven plan; on another, what the reduction
// trees of wrong elements say means little.
func CheckConsistency(p *ir.Plan, sizes []int64, launches int) (*Consistency, error) {
	sw := hasSwitchReduce(p)
	c := &Consistency{Identical: true, Fixed: !sw, Switch: sw}
	for i, size := range sizes {
		m := &consMode{trees: true, found: c, seen: map[consKey]consHolder{}, ref: map[[2]int][]byte{}}
		opt := Options{Size: size, Symbolic: true, PerElement: true, Launches: launches, NoRaces: true, cons: m}
		if err := runCons(p, opt); err != nil {
			return nil, err
		}
		// Interleavings are tried at the smallest size, whatever the
		// ranks' verdict: timing is a second question.
		m.compare = true
		for _, sched := range consSchedules {
			if i > 0 || c.Timing != nil || !contendedSemaphore(p) {
				break
			}
			opt.sched = sched
			if err := runCons(p, opt); err != nil {
				return nil, err
			}
		}
		if c.Timing != nil {
			c.Fixed = false
		}
		if !c.Identical {
			break
		}
	}
	return c, nil
}

// CompareFloats runs p at size on random floats of type dt (not the
// small integers Run feeds, whose sums are exact in any order) and
// compares bitwise the output elements that the collective defines as
// one value. It is the byte-level witness of CheckConsistency.
func CompareFloats(p *ir.Plan, size int64, dt DType, launches int, seed uint64) (*Consistency, error) {
	if !dt.IsFloat() {
		return nil, fmt.Errorf("CompareFloats needs a floating-point type, not %s", dt)
	}
	sw := hasSwitchReduce(p)
	c := &Consistency{Identical: true, Fixed: !sw, Switch: sw}
	m := &consMode{found: c, seen: map[consKey]consHolder{}}
	err := runCons(p, Options{Size: size, DType: dt, Launches: launches, Seed: seed, NoRaces: true, cons: m})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func runCons(p *ir.Plan, opt Options) error {
	rep, err := run(p, opt)
	if err != nil {
		return err
	}
	if len(rep.Deadlocks) > 0 || len(rep.Unbalanced) > 0 {
		return fmt.Errorf("the plan does not run to completion (%s): prove it first", rep.Verdict)
	}
	return nil
}

func hasSwitchReduce(p *ir.Plan) bool {
	found := false
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			eachPlanOp(tb.Ops, func(op *ir.Op) {
				found = found || op.Info().Class == ir.ClassSwitch && op.Info().Reduces
			})
		}
	}
	return found
}

// contendedSemaphore says whether some rank has a semaphore that ops of
// two or more of its blocks acquire: the one way a proven plan's
// order can depend on which block runs first.
func contendedSemaphore(p *ir.Plan) bool {
	for _, g := range p.GPUs {
		first := map[int]int{} // semaphore -> first block that acquires it
		contended := false
		for b, tb := range g.ThreadBlocks {
			eachPlanOp(tb.Ops, func(op *ir.Op) {
				if op.Code != ir.OpSemAcquire {
					return
				}
				for _, id := range op.SemaphoreIDs() {
					if fb, ok := first[id]; !ok {
						first[id] = b
					} else if fb != b {
						contended = true
					}
				}
			})
		}
		if contended {
			return true
		}
	}
	return false
}

// eachPlanOp calls f on ops and the bodies of their pipelines.
func eachPlanOp(ops []ir.Op, f func(*ir.Op)) {
	for i := range ops {
		f(&ops[i])
		eachPlanOp(ops[i].Ops(), f)
	}
}

// treeReduce is reduce in the trees mode: each 8-byte element of the
// result is the hash of the node that folds the sources' trees in order.
func (s *sim) treeReduce(srcs []payload, n int64) payload {
	out := s.scratchBuf(n)
	for x := int64(0); x+8 <= n; x += 8 {
		var acc uint64
		for k, src := range srcs {
			v := binary.LittleEndian.Uint64(src.b[x:])
			switch k {
			case 0:
				acc = v
			case 1:
				// The first pair commutes: a symmetric combination.
				acc = fmix(fmix(acc^0x5bd1e995) + fmix(v^0x5bd1e995))
			default:
				acc = fmix(fmix(acc^0x27d4eb2f)*31 + v)
			}
		}
		if len(srcs) > 1 {
			acc = fmix(acc ^ 0x165667b19e3779f9) // the rounding at the op's end
		}
		binary.LittleEndian.PutUint64(out[x:], acc)
	}
	return payload{b: out}
}

// consFill writes the random floats of (seed, launch, rank) into out:
// uniform in (-1, 1) with all mantissa bits used, so that any two orders
// of a sum differ somewhere in a buffer of a few hundred elements.
func consFill(dt DType, seed uint64, launch, rank int, out []byte) {
	x := seed ^ uint64(launch)<<32 ^ uint64(rank)<<48 ^ 0x9e3779b97f4a7c15
	vals := make([]float32, len(out)/dt.Size())
	for i := range vals {
		u := splitmix(&x)
		vals[i] = float32(int64(u>>11)-1<<52) / float32(1<<52)
		if math.Abs(float64(vals[i])) < 1e-3 {
			vals[i] = 0.5 // avoid subnormals in the narrow types
		}
	}
	storeF(dt, vals, out)
}

// fillLaunch writes rank's input of launch into arr: what fillInput
// makes, or random floats in a CompareFloats run.
func (s *sim) fillLaunch(launch, rank int, arr []byte) {
	if m := s.opt.cons; m != nil && !m.trees {
		consFill(s.opt.DType, s.opt.Seed, launch, rank, arr)
		return
	}
	fillInput(s.opt.DType, s.opt.Seed, launch, rank, arr)
}

// consCheck groups launch l's defined output elements by their symbolic
// definition and records the first group whose members differ.
func (s *sim) consCheck(l int) {
	m, c := s.opt.cons, s.opt.cons.found
	dt := s.opt.DType
	ins := make([][]byte, len(s.ranks))
	for r := range ins {
		ins[r] = makeInput(symType, s.opt.Seed, l, r, s.in)
	}
	// The definition in fingerprints, whatever type the run holds.
	s.opt.DType = symType
	want, err := s.expected(ins)
	s.opt.DType = dt
	if err != nil {
		return
	}
	sz := int64(dt.Size())
	for rank, got := range s.report.Outputs[l] {
		w, at := want[rank], s.outAt(rank)
		if got == nil || w == nil {
			continue
		}
		if m.trees {
			m.sameAsBefore(l, rank, at, got[at:at+int64(len(w))])
		}
		for off := int64(0); c.Identical && off+sz <= int64(len(w)); off += sz {
			val := got[at+off : at+off+sz]
			word := off &^ 7
			k := consKey{fp: binary.LittleEndian.Uint64(w[word:]), sub: off - word}
			if m.trees && binary.LittleEndian.Uint64(val) != k.fp {
				c.Reduced = true
			}
			h := Holder{Rank: rank, Off: at + off}
			first, ok := m.seen[k]
			if !ok {
				m.seen[k] = consHolder{at: h, val: string(val)}
				continue
			}
			if first.val != string(val) {
				c.Identical = false
				c.A, c.B, c.Size, c.Launch = first.at, h, s.opt.Size, l
			}
		}
	}
	// Launches are not compared with each other: their inputs differ.
	clear(m.seen)
}

// sameAsBefore keeps the first schedule's trees of (launch, rank) and
// compares a later schedule's with them; the first element that changed
// is where the order depends on timing.
func (m *consMode) sameAsBefore(l, rank int, at int64, got []byte) {
	k := [2]int{l, rank}
	if !m.compare {
		m.ref[k] = append([]byte(nil), got...)
		return
	}
	ref, c := m.ref[k], m.found
	if c.Timing != nil || ref == nil {
		return
	}
	for off := int64(0); off+8 <= int64(len(got)); off += 8 {
		if binary.LittleEndian.Uint64(got[off:]) != binary.LittleEndian.Uint64(ref[off:]) {
			c.Timing = &Holder{Rank: rank, Off: at + off}
			return
		}
	}
}
