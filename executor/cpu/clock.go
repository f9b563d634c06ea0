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
	kids *[vcFan]*vnode
	vals *[vcFan]uint32
}

// vleaf and vinner allocate a node with its array in one piece.
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
		x.n.vals = &x.a
		if from != nil {
			x.a = *from.vals
		}
		return &x.n
	}
	x := &vinner{n: vnode{tag: c.tag}}
	x.n.kids = &x.a
	if from != nil {
		x.a = *from.kids
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
	if c.get(i) != x {
		c.root = c.setNode(c.root, int(c.lv), i, x)
	}
}

// setNode returns subtree n at level l with entry i set to x, copying
// the path where c does not own it.
func (c *vclock) setNode(n *vnode, l, i int, x uint32) *vnode {
	n = c.mine(n, l == 0)
	m := n
	for ; l > 0; l-- {
		k := (i >> (l * vcBits)) & vcMask
		m.kids[k] = c.mine(m.kids[k], l == 1)
		m = m.kids[k]
	}
	m.vals[i&vcMask] = x
	return n
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
		return c.joinLeaf(d, s)
	}
	var out *vnode
	allS := true
	dks := d.kids
	for i, sk := range s.kids {
		dk := dks[i]
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

// join joins o into c. Release edges carry E and V, whose trees share
// most subtrees (a kernel boundary makes V equal to E; a relaxed edge
// makes them differ in a few): joinPair walks both pairs at once and
// joins each shared subtree once, for both.
func (c clocks) join(o clocks) {
	if o.V == nil {
		join(c.E, o.E)
		return
	}
	e, v := c.E, c.V
	e.root, v.root = joinPair(e, v, e.root, v.root, o.E.root, o.V.root, int(e.lv))
	// v may now hold nodes e made, and o's nodes may be in either.
	e.share()
	o.E.share()
	o.V.share()
}

// joinPair returns the joins of (se, sv) into (de, dv) at level l, made
// by ce and cv. Where de is dv and se is sv, both results are one node.
func joinPair(ce, cv *vclock, de, dv, se, sv *vnode, l int) (*vnode, *vnode) {
	if de == dv && se == sv {
		r := ce.joinNode(de, se, l)
		return r, r
	}
	if l == 0 || (se == nil && sv == nil) {
		return ce.joinNode(de, se, l), cv.joinNode(dv, sv, l)
	}
	var oe, ov *vnode
	allE, allV := true, true
	for i := range vcFan {
		dek, dvk, sek, svk := kid(de, i), kid(dv, i), kid(se, i), kid(sv, i)
		ne, nv := joinPair(ce, cv, dek, dvk, sek, svk, l-1)
		allE = allE && ne == sek
		allV = allV && nv == svk
		if ne != dek {
			if oe == nil {
				oe = ce.mine(de, false)
			}
			oe.kids[i] = ne
		}
		if nv != dvk {
			if ov == nil {
				ov = cv.mine(dv, false)
			}
			ov.kids[i] = nv
		}
	}
	switch {
	case allE:
		oe = se
	case oe == nil:
		oe = de
	}
	switch {
	case allV:
		ov = sv
	case ov == nil:
		ov = dv
	}
	return oe, ov
}

func kid(n *vnode, i int) *vnode {
	if n == nil {
		return nil
	}
	return n.kids[i]
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

// set sets agent a's entry of both clocks, keeping the subtrees E and V
// share shared.
func (c clocks) set(a int, x uint32) {
	if c.E.get(a) == x && c.V.get(a) == x {
		return
	}
	c.E.root, c.V.root = setPair(c.E, c.V, c.E.root, c.V.root, int(c.E.lv), a, x)
	c.E.share()
}

func setPair(ce, cv *vclock, e, v *vnode, l, a int, x uint32) (*vnode, *vnode) {
	if e == v {
		n := ce.setNode(e, l, a, x)
		return n, n
	}
	ne, nv := ce.mine(e, l == 0), cv.mine(v, l == 0)
	if l == 0 {
		ne.vals[a&vcMask], nv.vals[a&vcMask] = x, x
		return ne, nv
	}
	k := (a >> (l * vcBits)) & vcMask
	ne.kids[k], nv.kids[k] = setPair(ce, cv, ne.kids[k], nv.kids[k], l-1, a, x)
	return ne, nv
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

// joinLeaf is joinNode for leaves: one pass computes the maximum and
// whether either side already is it (the usual case: one side learned
// everything the other knows), without branches in the loop.
func (c *vclock) joinLeaf(d, s *vnode) *vnode {
	var m [vcFan]uint32
	var sBig, dBig uint32 // some entry of s (d) exceeds d's (s's)
	dv, sv := d.vals, s.vals
	for i := range m {
		x, y := sv[i], dv[i]
		sBig |= uint32((uint64(y) - uint64(x)) >> 63)
		dBig |= uint32((uint64(x) - uint64(y)) >> 63)
		m[i] = max(x, y)
	}
	switch {
	case sBig == 0:
		return d
	case dBig == 0:
		return s
	}
	out := c.mine(d, true)
	*out.vals = m
	return out
}
