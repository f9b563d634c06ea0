package cpu

import "sync"

// Buffers recycles the byte-level simulator's large arrays (every rank's
// buffers, scratch and packet store, and the streamed launches' input and
// output slices) from one Run to the next. A caller that runs many cases
// in one process, such as the GPU oracle at 64 MiB per rank, otherwise
// gets fresh memory for every case: the Go heap hands freed memory back
// and the next case faults every page in again (about a third of a
// case's CPU time on a 2-core VM). Only runs that stream (OnLaunch) in the
// byte mode use it, as only they hand nothing they allocate to the
// caller once Run returns. Safe for concurrent Runs.
type Buffers struct {
	mu   sync.Mutex
	free map[int][][]byte // by length
	held int64
	max  int64
}

// NewBuffers returns a pool that keeps at most max bytes between runs.
func NewBuffers(max int64) *Buffers {
	return &Buffers{free: map[int][][]byte{}, max: max}
}

// get returns n bytes, zeroed when zero is set (as make would); a nil
// pool allocates.
func (b *Buffers) get(n int64, zero bool) []byte {
	if b != nil {
		b.mu.Lock()
		l := b.free[int(n)]
		if len(l) > 0 {
			s := l[len(l)-1]
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

// put keeps s for a later get of its length, unless the pool is full.
func (b *Buffers) put(s []byte) {
	if b == nil || len(s) == 0 {
		return
	}
	s = s[:cap(s)]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+int64(len(s)) > b.max {
		return
	}
	b.free[len(s)] = append(b.free[len(s)], s)
	b.held += int64(len(s))
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
