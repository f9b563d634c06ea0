package cpu

// Vector clocks are persistent radix trees shared copy-on-write. A dense
// []uint32 per clock cost O(agents) per signal, packet and op and kept one
// such copy per token in flight: at 64 ranks of a ring (2176 agents) a
// 1 MiB proof took 0.8 GB, and at 128 ranks it ran out of memory. Most of a
// snapshot equals the clock it was taken from and the clocks it meets,
// so here a snapshot is a pointer, an update copies one path, and a join
// visits only subtrees whose pointers differ, adopting the other side's
// subtree wherever that dominates, so equal knowledge stays one shared
// node. Agent ids are numbered block index major (setup): knowledge that
// travels along block k of every rank then sits in few leaves. (16-entry
// nodes allocated more and ran slower on a 128-rank ring.)
const (
	vcBits = 5
	vcFan  = 1 << vcBits
	vcMask = vcFan - 1
)

// vleaf holds vcFan entries, two to a word so that joinLeaf works on
// pairs. It has no pointers, so the collector does not scan leaves. A
// node (leaf or inner) may change in place only through the clock whose
// tag it carries; every other holder treats it as immutable.
type vleaf struct {
	tag uint64
	vmemo
	w [vcFan / 2]uint64
}

func (f *vleaf) get(k int) uint32 { return uint32(f.w[k>>1] >> (32 * (k & 1))) }

func (f *vleaf) set(k int, x uint32) {
	sh := 32 * (k & 1)
	f.w[k>>1] = f.w[k>>1]&^(0xFFFFFFFF<<sh) | uint64(x)<<sh
}

// vnode is an inner node: kids at levels above 1, leaves at level 1. A
// nil child is all zeros.
type vnode struct {
	tag uint64
	vmemo
	kids   *[vcFan]*vnode
	leaves *[vcFan]*vleaf
}

// vmemo remembers the last two nodes that a node (leaf or inner) is
// known to dominate entrywise, so that a join meeting such a pair again
// skips the walk (two: a block's clock takes turns absorbing its data
// and its acknowledgement partners). A ring step moves a block's clock in a few subtrees, yet its
// next join met the same unchanged subtrees of its neighbour's clock and
// compared them leaf by leaf, finding again that nothing was new: at 128
// ranks, 109 leaves per join. Ids, not pointers: a pointer would keep
// the dominated node, and the chain of nodes it dominated, alive.
//
// The fact stays true: from names only nodes that can no longer change
// (a join's source, whose clock moves to a new tag afterwards, or the
// node a copy was made from), and a node changes in place only by
// growing. So it may be written into a node other clocks share.
type vmemo struct {
	id   uint64    // unique in the run (tagSource)
	from [2]uint64 // ids of nodes this one dominates, latest first; 0: none
}

// has reports whether the node is known to dominate node id.
func (m *vmemo) has(id uint64) bool { return m.from[0] == id || m.from[1] == id }

// add records that the node dominates node id.
func (m *vmemo) add(id uint64) {
	if m.from[0] != id {
		m.from[1], m.from[0] = m.from[0], id
	}
}

// covers reports whether subtree d is known to dominate subtree s.
func covers(d, s *vnode) bool {
	return s == nil || d == s || d != nil && d.has(s.id)
}

func leafCovers(d, s *vleaf) bool {
	return s == nil || d == s || d != nil && d.has(s.id)
}

// vinner and vbottom allocate a node with its array in one piece.
type vinner struct {
	n vnode
	a [vcFan]*vnode
}

type vbottom struct {
	n vnode
	a [vcFan]*vleaf
}

// tagSource hands out one run's clock tags. A tag is never reused, so a
// node another clock has seen stays immutable once its owner has moved
// to a new tag. (Per run, not global: the proofs of a plan run in
// parallel, and a shared counter bounced between the cores.)
type tagSource struct {
	n  uint64
	sp *sparseRun // non-nil: the run's clocks are sparse (sparseclock.go)
}

func (t *tagSource) next() uint64 { t.n++; return t.n }

// vclock is one vector clock over agents. tag 0: frozen (a snapshot that
// nothing may change).
type vclock struct {
	root *vnode
	tag  uint64
	lv   uint8 // inner levels (at least one)
	ts   *tagSource
	// A sparse clock (sp non-nil) holds its entries in ents, sorted by
	// agent, instead of the tree; shared: another clock holds ents too.
	sp     *sparseRun
	ents   []sent
	shared bool
	// borrowed: ents belong to another clock, which does not know (an
	// op's view of its block's clock, borrow); a copy taken from c must
	// copy them.
	borrowed bool
}

func newVC(n int, ts *tagSource) *vclock {
	if ts.sp != nil {
		return &vclock{sp: ts.sp}
	}
	lv := uint8(1)
	for c := vcFan * vcFan; c < n; c <<= vcBits {
		lv++
	}
	return &vclock{tag: ts.next(), lv: lv, ts: ts}
}

// own returns *o, first setting it to c's own copy of n (inner) when the
// join has not written into one yet: the copy is made at the first child
// that changes, and only then. The copy is a call of its own so that own
// stays small enough to inline into the join loops.
func (c *vclock) own(o **vnode, n *vnode, bottom bool) *vnode {
	if *o == nil {
		c.ownCopy(o, n, bottom)
	}
	return *o
}

func (c *vclock) ownCopy(o **vnode, n *vnode, bottom bool) { *o = c.inner(n, bottom) }

// inner returns n if c may change it in place, else c's own copy of it
// (a new node when n is nil).
func (c *vclock) inner(n *vnode, bottom bool) *vnode {
	if n != nil && n.tag == c.tag && c.tag != 0 {
		return n
	}
	m := vmemo{id: c.ts.next()}
	if n != nil {
		m.from = n.from
		m.add(n.id) // a copy dominates what it copies, and what that did
	}
	if bottom {
		x := &vbottom{n: vnode{tag: c.tag, vmemo: m}}
		x.n.leaves = &x.a
		if n != nil {
			x.a = *n.leaves
		}
		return &x.n
	}
	x := &vinner{n: vnode{tag: c.tag, vmemo: m}}
	x.n.kids = &x.a
	if n != nil {
		x.a = *n.kids
	}
	return &x.n
}

// leaf is inner for leaves.
func (c *vclock) leaf(f *vleaf) *vleaf {
	if f != nil && f.tag == c.tag && c.tag != 0 {
		return f
	}
	x := &vleaf{tag: c.tag, vmemo: vmemo{id: c.ts.next()}}
	if f != nil {
		x.w, x.from = f.w, f.from
		x.add(f.id)
	}
	return x
}

// share is called whenever another clock takes references to c's nodes:
// c moves to a fresh tag, so it copies those nodes before changing them.
func (c *vclock) share() {
	if c.tag != 0 {
		c.tag = c.ts.next()
	}
}

func (c *vclock) get(i int) uint32 {
	if c.sp != nil {
		return sget(c.ents, int32(i))
	}
	n := c.root
	for l := int(c.lv); l > 1; l-- {
		if n == nil {
			return 0
		}
		n = n.kids[(i>>(l*vcBits))&vcMask]
	}
	if n == nil {
		return 0
	}
	f := n.leaves[(i>>vcBits)&vcMask]
	if f == nil {
		return 0
	}
	return f.get(i & vcMask)
}

func (c *vclock) set(i int, x uint32) {
	if c.sp != nil {
		c.sset(int32(i), x)
		return
	}
	if c.get(i) != x {
		c.root = c.setNode(c.root, int(c.lv), i, x)
	}
}

// setNode returns subtree n at level l with entry i set to x, copying
// the path where c does not own it.
func (c *vclock) setNode(n *vnode, l, i int, x uint32) *vnode {
	n = c.inner(n, l == 1)
	m := n
	for ; l > 1; l-- {
		k := (i >> (l * vcBits)) & vcMask
		m.kids[k] = c.inner(m.kids[k], l == 2)
		m = m.kids[k]
	}
	k := (i >> vcBits) & vcMask
	f := c.leaf(m.leaves[k])
	f.set(i&vcMask, x)
	m.leaves[k] = f
	return n
}

// assign makes c equal to o.
func (c *vclock) assign(o *vclock) {
	if c == o {
		return
	}
	if c.sp != nil {
		c.ents, c.shared, c.borrowed = o.ents, true, o.borrowed
		if !o.borrowed {
			o.shared = true
		}
		return
	}
	c.root = o.root
	o.share()
}

// borrow makes c a view of o's entries for the length of one op, during
// which o does not change; unlike assign it leaves o free to change in
// place afterwards (a block's clock changes at every nop, and an op's
// view of it is taken at every data op). Sparse clocks only.
func (c clocks) borrow(o clocks) {
	c.E.ents, c.E.shared, c.E.borrowed = o.E.ents, true, true
	c.V.ents, c.V.shared, c.V.borrowed = o.V.ents, true, true
}

// clone is a changeable copy of c.
func (c *vclock) clone() *vclock {
	if c.sp != nil {
		if c.borrowed {
			return &vclock{sp: c.sp, ents: append([]sent(nil), c.ents...)}
		}
		c.shared = true
		return &vclock{sp: c.sp, ents: c.ents, shared: true}
	}
	d := &vclock{root: c.root, tag: c.ts.next(), lv: c.lv, ts: c.ts}
	c.share()
	return d
}

// frozen is an unchangeable snapshot of c.
func (c *vclock) frozen() *vclock {
	if c.sp != nil {
		return c.clone()
	}
	if c.tag == 0 {
		return c
	}
	d := &vclock{root: c.root, lv: c.lv, ts: c.ts}
	c.share()
	return d
}

func (c *vclock) reset() {
	c.root = nil
	if c.shared {
		c.ents, c.shared, c.borrowed = nil, false, false
	}
	c.ents = c.ents[:0] // c's own slice: keep its room
}

// empty reports whether c knows nothing.
func (c *vclock) empty() bool { return c.root == nil && len(c.ents) == 0 }

// freeze makes c, which nothing else holds, an unchangeable snapshot.
func (c *vclock) freeze() {
	c.tag = 0
	c.shared = true
}

// join sets dst to the entrywise maximum of dst and src.
func join(dst, src *vclock) {
	if dst.sp != nil {
		if dst != src {
			dst.sjoin(src.ents, 0)
		}
		return
	}
	if dst == src || src.root == nil || dst.root == src.root {
		return
	}
	dst.root = dst.joinNode(dst.root, src.root, int(dst.lv))
	src.share()
}

// joinNode returns the maximum of subtrees d (c's) and s at level l,
// reusing d where it dominates, s where s does, and changing d in place
// where c owns it.
func (c *vclock) joinNode(d, s *vnode, l int) *vnode {
	if covers(d, s) {
		return d
	}
	if d == nil || s.has(d.id) {
		return s
	}
	var out *vnode
	allS := true
	if l == 1 {
		dl := d.leaves
		for i, sk := range s.leaves {
			dk := dl[i]
			nk := c.joinLeaf(dk, sk)
			allS = allS && nk == sk
			if nk != dk {
				c.own(&out, d, true).leaves[i] = nk
			}
		}
	} else {
		dks := d.kids
		for i, sk := range s.kids {
			dk := dks[i]
			nk := c.joinNode(dk, sk, l-1)
			allS = allS && nk == sk
			if nk != dk {
				c.own(&out, d, false).kids[i] = nk
			}
		}
	}
	switch {
	case allS:
		return s
	case out == nil:
		d.add(s.id)
		return d
	}
	out.add(s.id)
	return out
}

// hiBits are the top bits of the two 32-bit entries in a leaf word.
const hiBits = 0x8000000080000000

// joinLeaf returns the entrywise maximum of d (c's) and s, or d or s
// itself when it already is that maximum (the usual case: one side has
// learned everything the other knows). Entries are compared two to a
// word without branches (SWAR): for each 32-bit lane, ge has the lane's
// top bit set where s's entry is at least d's.
func (c *vclock) joinLeaf(d, s *vleaf) *vleaf {
	if leafCovers(d, s) {
		return d
	}
	if d == nil || s.has(d.id) {
		return s
	}
	var m [vcFan / 2]uint64
	var sBig, dBig uint64 // nonzero: some entry of s (d) exceeds d's (s's)
	for i := range m {
		x, y := s.w[i], d.w[i]
		t := (x | hiBits) - (y &^ hiBits)
		ge := (x&^y | ^(x^y)&t) & hiBits
		mask := (ge >> 31) * 0xFFFFFFFF
		r := x&mask | y&^mask
		sBig |= r ^ y
		dBig |= r ^ x
		m[i] = r
	}
	switch {
	case sBig == 0:
		d.add(s.id)
		return d
	case dBig == 0:
		return s
	}
	if d.tag == c.tag && c.tag != 0 {
		d.w = m
		d.add(s.id)
		return d
	}
	return &vleaf{tag: c.tag, vmemo: vmemo{id: c.ts.next(), from: [2]uint64{s.id}}, w: m}
}

// clocks is a pair of vector clocks over all agents (blocks, proxies and
// hosts): E orders execution, V orders visibility of writes. V never runs
// ahead of E. Copies of a clocks value refer to the same two clocks.
type clocks struct{ E, V *vclock }

func newClocks(n int, ts *tagSource) clocks { return clocks{E: newVC(n, ts), V: newVC(n, ts)} }

// join joins o into c. Release edges carry E and V, whose trees share
// most subtrees (a kernel boundary makes V equal to E; a relaxed edge
// makes them differ in a few): joinPair walks both pairs at once and
// joins each shared subtree once, for both.
func (c clocks) join(o clocks) {
	if c.E.sp != nil {
		c.sjoin(o, 0)
		return
	}
	if o.V == nil {
		join(c.E, o.E)
		return
	}
	e, v := c.E, c.V
	made := false
	e.root, v.root = joinPair(e, v, e.root, v.root, o.E.root, o.V.root, int(e.lv), &made)
	if made {
		e.share() // v holds nodes e made
	}
	o.E.share()
	o.V.share()
}

// joinPair returns the joins of (se, sv) into (de, dv) at level l, made
// by ce and cv. Where de is dv and se is sv, both results are one node;
// made is set when such a node is new (ce's, so ce must not change it in
// place any more).
func joinPair(ce, cv *vclock, de, dv, se, sv *vnode, l int, made *bool) (*vnode, *vnode) {
	if de == dv && se == sv {
		r := ce.joinNode(de, se, l)
		if r != de && r != se {
			*made = true
		}
		return r, r
	}
	if covers(de, se) && covers(dv, sv) {
		return de, dv
	}
	if de == nil && dv == nil {
		// Nothing known yet (a block's pending clocks after a nop): adopt
		// the source's pair rather than walk it leaf by leaf.
		return se, sv
	}
	var oe, ov *vnode
	allE, allV := true, true
	for i := range vcFan {
		if l == 1 {
			dek, dvk, sek, svk := leafOf(de, i), leafOf(dv, i), leafOf(se, i), leafOf(sv, i)
			ne := ce.joinLeaf(dek, sek)
			nv := ne
			if dek != dvk || sek != svk {
				nv = cv.joinLeaf(dvk, svk)
			} else if ne != dek && ne != sek {
				*made = true
			}
			allE = allE && ne == sek
			allV = allV && nv == svk
			if ne != dek {
				ce.own(&oe, de, true).leaves[i] = ne
			}
			if nv != dvk {
				cv.own(&ov, dv, true).leaves[i] = nv
			}
			continue
		}
		dek, dvk, sek, svk := kid(de, i), kid(dv, i), kid(se, i), kid(sv, i)
		ne, nv := joinPair(ce, cv, dek, dvk, sek, svk, l-1, made)
		allE = allE && ne == sek
		allV = allV && nv == svk
		if ne != dek {
			ce.own(&oe, de, false).kids[i] = ne
		}
		if nv != dvk {
			cv.own(&ov, dv, false).kids[i] = nv
		}
	}
	oe = joined(oe, de, se, allE)
	ov = joined(ov, dv, sv, allV)
	return oe, ov
}

// joined is joinPair's result for one side: s where s was the maximum
// everywhere, else d or d's changed copy o, which then dominates s.
func joined(o, d, s *vnode, allS bool) *vnode {
	switch {
	case allS:
		return s
	case o == nil:
		o = d
	}
	if o != nil && s != nil {
		o.add(s.id)
	}
	return o
}

func kid(n *vnode, i int) *vnode {
	if n == nil {
		return nil
	}
	return n.kids[i]
}

func leafOf(n *vnode, i int) *vleaf {
	if n == nil {
		return nil
	}
	return n.leaves[i]
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
	if c.E.sp != nil {
		c.E.sset(int32(a), x)
		c.V.sset(int32(a), x)
		return
	}
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
	ne, nv := ce.inner(e, l == 1), cv.inner(v, l == 1)
	if l == 1 {
		k := (a >> vcBits) & vcMask
		fe, fv := ne.leaves[k], nv.leaves[k]
		if fe == fv {
			f := ce.leaf(fe)
			f.set(a&vcMask, x)
			ne.leaves[k], nv.leaves[k] = f, f
			return ne, nv
		}
		fe, fv = ce.leaf(fe), cv.leaf(fv)
		fe.set(a&vcMask, x)
		fv.set(a&vcMask, x)
		ne.leaves[k], nv.leaves[k] = fe, fv
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
	case c.E.sp != nil:
		f.V = c.V.frozen()
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

// recv joins clocks another agent published (a token, a packet, a
// proxy's or a barrier's clocks) into c: the same join as join, but a
// sparse clock counts the hop (sparseclock.go).
func (c clocks) recv(o clocks) {
	if c.E.sp != nil {
		c.sjoin(o, 1)
		return
	}
	c.join(o)
}

// recvE is recv for execution order alone (relaxed edges).
func recvE(dst, src *vclock) {
	if dst.sp != nil {
		dst.sjoin(src.ents, 1)
		return
	}
	join(dst, src)
}

// sjoin is join and recv on sparse clocks.
func (c clocks) sjoin(o clocks, hop uint8) {
	c.E.sjoin(o.E.ents, hop)
	if o.V != nil {
		c.V.sjoin(o.V.ents, hop)
	}
}

// knows is the race check's question: is (a, e) ordered before the
// holder, for visibility (v) or execution.
func (c clocks) knows(a int, e uint32, v bool) bool {
	if v {
		return c.V.knows(a, e, true)
	}
	return c.E.knows(a, e, false)
}
