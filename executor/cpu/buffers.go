package cpu

import (
	"sync"

	"github.com/msccl-go/msccl-go/ir"
)

// Buffers recycles the byte-level simulator's large arrays (every rank's
// buffers, scratch and packet store, and the streamed launches' input and
// output slices) from one Run to the next. A caller that runs many cases
// in one process, such as the GPU oracle at 64 MiB per rank, otherwise
// gets fresh memory for every case: the Go heap hands freed memory back
// and the next case faults every page in again (about a third of a
// case's CPU time on a 2-core VM). Only runs that stream (OnLaunch) in the
// byte mode use it, as only they hand nothing they allocate to the
// caller once Run returns. Safe for concurrent Runs.
//
// A full pool makes room by dropping the arrays put back longest ago:
// the lengths in demand change as a caller moves from one plan and size
// to the next, and a pool that kept the first lengths it held (as it
// once did) would leave every later case to fault its pages in.
type Buffers struct {
	mu   sync.Mutex
	free map[int][]pooled // by length, oldest first
	seq  uint64
	held int64
	max  int64
}

type pooled struct {
	b   []byte
	seq uint64 // when it was put back
}

// NewBuffers returns a pool that keeps at most max bytes between runs.
func NewBuffers(max int64) *Buffers {
	return &Buffers{free: map[int][]pooled{}, max: max}
}

// get returns n bytes, zeroed when zero is set (as make would); a nil
// pool allocates.
func (b *Buffers) get(n int64, zero bool) []byte {
	if b != nil {
		b.mu.Lock()
		l := b.free[int(n)]
		if len(l) > 0 {
			s := l[len(l)-1].b
			b.free[int(n)] = l[:len(l)-1]
			b.held -= n
			b.mu.Unlock()
			if zero {
				clear(s)
			}
			return s
		}
		b.mu.Unlock()
	}
	return make([]byte, n)
}

// put keeps s for a later get of its length, dropping the arrays put back
// longest ago when the pool would hold more than its bound.
func (b *Buffers) put(s []byte) {
	if b == nil || len(s) == 0 {
		return
	}
	s = s[:cap(s)]
	n := int64(len(s))
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.max {
		return
	}
	for b.held+n > b.max {
		b.dropOldest()
	}
	b.seq++
	b.free[len(s)] = append(b.free[len(s)], pooled{s, b.seq})
	b.held += n
}

// dropOldest lets the garbage collector have the array put back longest
// ago (each length's list is oldest first).
func (b *Buffers) dropOldest() {
	k, at := -1, uint64(0)
	for n, l := range b.free {
		if len(l) > 0 && (k < 0 || l[0].seq < at) {
			k, at = n, l[0].seq
		}
	}
	l := b.free[k]
	l[0] = pooled{}
	if b.free[k] = l[1:]; len(l) == 1 {
		delete(b.free, k)
	}
	b.held -= int64(k)
}

// recycle hands the run's arrays to opt.Buffers once Run is done with
// them: only a streaming byte-level run, whose report holds none of them.
func (s *sim) recycle() {
	b := s.opt.Buffers
	if b == nil || s.stream.on == nil || s.field != nil {
		return
	}
	for _, rs := range s.ranks {
		for i, a := range rs.arrs {
			b.put(a)
			rs.arrs[i] = nil
		}
		b.put(rs.pkt)
		rs.pkt = nil
	}
	for _, f := range s.stream.free {
		b.put(f)
	}
	s.stream.free = nil
}

// HoldsScratch says whether a byte-level run of p holds a scratch array
// besides its packet store (ir.Layout's ScratchAlloc bytes, and half as
// many for packets): only when some op may move data through scratch
// other than as packets, since the array is made at the first such access
// (sim.array). A remote or switch reference counts whatever buffer it
// names. Callers that budget memory per run use it (the GPU oracle).
func HoldsScratch(p *ir.Plan) bool {
	return anyOp(p, func(op *ir.Op) bool {
		for k, r := range op.Src {
			if !op.IsPacketSrc(k) && (r.Kind != ir.RefLocal || r.Type == ir.BufScratch) {
				return true
			}
		}
		for k, r := range op.Dst {
			if !op.IsPacketDst(k) && (r.Kind != ir.RefLocal || r.Type == ir.BufScratch) {
				return true
			}
		}
		return false
	})
}

// anyOp says whether f holds for some op of p, pipeline bodies included.
func anyOp(p *ir.Plan, f func(op *ir.Op) bool) bool {
	var walk func(ops []ir.Op) bool
	walk = func(ops []ir.Op) bool {
		for i := range ops {
			if f(&ops[i]) || walk(ops[i].Ops()) {
				return true
			}
		}
		return false
	}
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			if walk(tb.Ops) {
				return true
			}
		}
	}
	return false
}
