package cpu

// clocks is a pair of vector clocks over all agents (blocks, then a proxy
// and a host per rank): E orders execution, V orders visibility of
// writes. V never runs ahead of E.
type clocks struct{ E, V []uint32 }

func newClocks(n int) clocks { return clocks{E: make([]uint32, n), V: make([]uint32, n)} }

func join(dst, src []uint32) {
	for i, x := range src {
		if x > dst[i] {
			dst[i] = x
		}
	}
}

func (c clocks) join(o clocks) {
	join(c.E, o.E)
	if o.V != nil {
		join(c.V, o.V)
	}
}

func (c clocks) clear() {
	clear(c.E)
	clear(c.V)
}

// slab hands out clock snapshots from large blocks, so that signals and
// packet writes cost one copy and no allocation of their own.
type slab struct {
	n   int
	buf []uint32
}

func (s *slab) take() []uint32 {
	if len(s.buf) < s.n {
		s.buf = make([]uint32, s.n*256)
	}
	v := s.buf[:s.n:s.n]
	s.buf = s.buf[s.n:]
	return v
}

func (s *slab) copyOf(v []uint32) []uint32 {
	c := s.take()
	copy(c, v)
	return c
}

// token is a signal in flight, a semaphore release or a packet write: the
// clocks the receiver acquires (V nil for relaxed signals and packets).
type token struct {
	c     clocks
	place int32
	t     float64 // simulated time it arrives, for the trace
	flow  int     // trace flow id (signal → wait arrow); 0 when not traced
}

// tokenQueue is a FIFO; the receiver of the k-th signal acquires the k-th
// sender's clocks, the conservative reading of a counting semaphore.
type tokenQueue struct {
	q    []token
	head int
}

func (q *tokenQueue) push(t token) { q.q = append(q.q, t) }
func (q *tokenQueue) len() int     { return len(q.q) - q.head }
func (q *tokenQueue) pop() token {
	t := q.q[q.head]
	q.q[q.head] = token{}
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	}
	return t
}
func (q *tokenQueue) front() token { return q.q[q.head] }

// semaphore is a cross-block counting semaphore: free counts the initial
// permits not yet taken, which carry no clocks.
type semaphore struct {
	free, init int
	q          tokenQueue
}

func (s *semaphore) value() int { return s.free + s.q.len() }

// barrier gathers num_threadblocks blocks of a rank.
type barrier struct {
	gen     int
	arrived int
	acc     clocks
	t       float64
	results map[int]barrierResult
}

type barrierResult struct {
	c       clocks
	t       float64
	pending int
}
