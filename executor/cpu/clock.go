package cpu

import "sync/atomic"

// Vector clocks are persistent radix trees (vcFan entries a node) shared
// copy-on-write. A dense []uint32 per clock cost O(agents) per signal,
// packet and op and kept one such copy per token in flight: at 64 ranks
// of a ring (2176 agents) a proof took 0.8 GB, at 128 it ran out of
// memory. Most of a snapshot equals the clock it was taken from and the
// clocks it meets, so here a snapshot is a pointer, an update copies one
// path, and a join visits only subtrees whose pointers differ, adopting
// the other side's subtree whenever it dominates so equal knowledge stays
// one shared node. Agent ids are numbered rank by rank (setup), so what a
// block knows of one rank sits in few leaves.
const (
	vcBits = 5
	vcFan  = 1 << vcBits
	vcMask = vcFan - 1
)

// vnode is a leaf (vals) or an inner node (kids); a nil child is all
// zeros. A node may change in place only through the clock whose tag it
// carries; any other holder treats it as immutable.
type vnode struct {
	tag  uint64
	kids []*vnode
	vals []uint32
}

type vleaf struct {
	n vnode
	a [vcFan]uint32
}

type vinner struct {
	n vnode
	a [vcFan]*vnode
}

// vcTags hands out clock tags; a tag is never reused, so a node another
// clock has ever seen stays immutable once its owner moves to a new tag.
var vcTags atomic.Uint64

func newTag() uint64 { return vcTags.Add(1) }

// vclock is one vector clock over agents. tag 0: frozen (a snapshot that
// nothing may change).
type vclock struct {
	root *vnode
	tag  uint64
	lv   uint8 // inner levels above the leaves
}

func newVC(n int) *vclock {
	lv := uint8(0)
	for c := vcFan; c < n; c <<= vcBits {
		lv++
	}
	return &vclock{tag: newTag(), lv: lv}
}

func (c *vclock) node(leaf bool, from *vnode) *vnode {
	if leaf {
		x := &vleaf{n: vnode{tag: c.tag}}
		x.n.vals = x.a[:]
		if from != nil {
			copy(x.a[:], from.vals)
		}
		return &x.n
	}
	x := &vinner{n: vnode{tag: c.tag}}
	x.n.kids = x.a[:]
	if from != nil {
		copy(x.a[:], from.kids)
	}
	return &x.n
}

// mine returns n if c may change it in place, else c's own copy of it.
func (c *vclock) mine(n *vnode, leaf bool) *vnode {
	if n != nil && n.tag == c.tag && c.tag != 0 {
		return n
	}
	return c.node(leaf, n)
}

// share is called whenever another clock takes references to c's nodes:
// c moves to a fresh tag, so it copies those nodes before changing them.
func (c *vclock) share() {
	if c.tag != 0 {
		c.tag = newTag()
	}
}

func (c *vclock) get(i int) uint32 {
	n := c.root
	for l := int(c.lv); l > 0; l-- {
		if n == nil {
			return 0
		}
		n = n.kids[(i>>(l*vcBits))&vcMask]
	}
	if n == nil {
		return 0
	}
	return n.vals[i&vcMask]
}

func (c *vclock) set(i int, x uint32) {
	if c.get(i) == x {
		return
	}
	c.root = c.mine(c.root, c.lv == 0)
	n := c.root
	for l := int(c.lv); l > 0; l-- {
		k := (i >> (l * vcBits)) & vcMask
		n.kids[k] = c.mine(n.kids[k], l == 1)
		n = n.kids[k]
	}
	n.vals[i&vcMask] = x
}

// assign makes c equal to o.
func (c *vclock) assign(o *vclock) {
	if c == o {
		return
	}
	c.root = o.root
	o.share()
}

// clone is a changeable copy of c.
func (c *vclock) clone() *vclock {
	d := &vclock{root: c.root, tag: newTag(), lv: c.lv}
	c.share()
	return d
}

// frozen is an unchangeable snapshot of c.
func (c *vclock) frozen() *vclock {
	if c.tag == 0 {
		return c
	}
	d := &vclock{root: c.root, lv: c.lv}
	c.share()
	return d
}

func (c *vclock) reset() { c.root = nil }

// join sets dst to the entrywise maximum of dst and src.
func join(dst, src *vclock) {
	if dst == src || src.root == nil || dst.root == src.root {
		return
	}
	if r := dst.joinNode(dst.root, src.root, int(dst.lv)); r != dst.root {
		dst.root = r
	}
	src.share()
}

// joinNode returns the maximum of subtrees d (c's) and s at level l,
// reusing d where it dominates, s where s does, and changing d in place
// where c owns it.
func (c *vclock) joinNode(d, s *vnode, l int) *vnode {
	if s == nil || d == s {
		return d
	}
	if d == nil {
		return s
	}
	if l == 0 {
		dGE, sGE := true, true
		for i, x := range s.vals {
			y := d.vals[i]
			if x > y {
				dGE = false
			} else if x < y {
				sGE = false
			}
		}
		switch {
		case dGE:
			return d
		case sGE:
			return s
		}
		out := c.mine(d, true)
		for i, x := range s.vals {
			out.vals[i] = max(out.vals[i], x)
		}
		return out
	}
	var out *vnode
	allS := true
	for i, sk := range s.kids {
		dk := d.kids[i]
		nk := c.joinNode(dk, sk, l-1)
		if nk != sk {
			allS = false
		}
		if nk != dk {
			if out == nil {
				out = c.mine(d, false)
			}
			out.kids[i] = nk
		}
	}
	switch {
	case allS:
		return s
	case out == nil:
		return d
	}
	return out
}

// clocks is a pair of vector clocks over all agents (blocks, proxies and
// hosts): E orders execution, V orders visibility of writes. V never runs
// ahead of E. Copies of a clocks value refer to the same two clocks.
type clocks struct{ E, V *vclock }

func newClocks(n int) clocks { return clocks{E: newVC(n), V: newVC(n)} }

// Release edges carry E and V, which are often the same tree (a kernel
// boundary sets V to E, and a join or set applied to equal pairs keeps
// them equal): then V takes E's result instead of repeating the work.
func (c clocks) join(o clocks) {
	same := o.V != nil && c.E.root == c.V.root && o.E.root == o.V.root
	join(c.E, o.E)
	switch {
	case same:
		c.V.assign(c.E)
	case o.V != nil:
		join(c.V, o.V)
	}
}

func (c clocks) clear() {
	c.E.reset()
	c.V.reset()
}

// assign makes c equal to o (which must carry both clocks).
func (c clocks) assign(o clocks) {
	c.E.assign(o.E)
	c.V.assign(o.V)
}

// set sets agent a's entry of both clocks.
func (c clocks) set(a int, x uint32) {
	same := c.E.root == c.V.root
	c.E.set(a, x)
	if same {
		c.V.assign(c.E)
	} else {
		c.V.set(a, x)
	}
}

// frozen is an unchangeable snapshot: what a token carries.
func (c clocks) frozen() clocks {
	f := clocks{E: c.E.frozen()}
	switch {
	case c.V == nil:
	case c.V.root == c.E.root:
		f.V = f.E
	default:
		f.V = c.V.frozen()
	}
	return f
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
