package compiler

import (
	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// nodeSync is what sync notes in an action besides its waits and signals.
type nodeSync struct {
	preNop, preFl bool // a nop (flush) before the op
}

// syncLists holds the waits (pre) and signals (post) of actions beyond
// their first of each, which the action holds itself (wait1, signal1):
// most actions have one of each, and layout then finds them in the action
// it reads anyway rather than in a cache line of their own. The rest of an
// action's list is a run of the array from waitsAt (signalsAt), the last
// one flagged. (A slice per list cost 48 bytes of headers in each of a
// million actions, two pointers for the collector.) The walk hands an
// action all its waits at once, so they go straight to pre; its signals
// come later, one consumer at a time, so they are collected as postRecs
// and grouped by node when the walk ends.
type syncLists struct {
	pre, post []syncItem
	posts     []postRec
}

// postRec is a signal of the action at node seq, until finishLists.
type postRec struct {
	seq int32
	it  syncItem
}

// addPre appends a wait of a; every wait of a comes before any wait of a
// later action.
func (l *syncLists) addPre(a *action, it syncItem) {
	switch {
	case a.wait1.kind == itemNone:
		a.wait1 = it
		return
	case a.waitsAt == 0:
		a.waitsAt = int32(len(l.pre)) + 1
	default:
		l.pre[len(l.pre)-1].last = false
	}
	it.last = true
	l.pre = append(l.pre, it)
}

// addPost appends a signal of the action at node seq.
func (l *syncLists) addPost(seq int32, a *action, it syncItem) {
	if a.signal1.kind == itemNone {
		a.signal1 = it
		return
	}
	l.posts = append(l.posts, postRec{seq: seq, it: it})
}

// finishLists groups the signals by node, each node's in the order they
// came, and points their actions at them.
func (s *syncer) finishLists() {
	l := &s.lists
	at := make([]int32, len(s.nodes)+1)
	for _, r := range l.posts {
		at[r.seq+1]++
	}
	for i := 1; i < len(at); i++ {
		at[i] += at[i-1]
	}
	l.post = make([]syncItem, len(l.posts))
	for _, r := range l.posts {
		l.post[at[r.seq]] = r.it
		at[r.seq]++
	}
	// at[seq] is now the end of node seq's run.
	for seq, nd := range s.nodes {
		start := int32(0)
		if seq > 0 {
			start = at[seq-1]
		}
		if at[seq] > start {
			l.post[at[seq]-1].last = true
			nd.act.signalsAt = start + 1
		}
	}
	l.posts = nil
}

// list appends to buf an action's list: first (none if itemNone), then
// the run of items that starts at at (1-based; 0: none).
func list(buf []syncItem, first syncItem, items []syncItem, at int32) []syncItem {
	if first.kind == itemNone {
		return buf
	}
	buf = append(buf, first)
	if at == 0 {
		return buf
	}
	n := at - 1
	for !items[n].last {
		n++
	}
	return append(buf, items[at-1:n+1]...)
}

// syncItem is an item of an action's pre or post list. A large program
// holds millions, so they keep only what varies: their source is always
// the action's own (a wait is reported at the op that waits, a signal at
// the op whose result it publishes, and every action has a position), and
// they are signals, waits or semaphore ops, which name no action and no
// flush list. Without pointers, their slabs are never scanned by the
// collector either.
type syncItem struct {
	id   int32
	kind itemKind
	typ  ir.ChannelType
	side uint8
	last bool // the last of its action's list (syncLists)
}

// itemNone marks an absent syncItem: no list holds actions.
const itemNone = itemAct

// compactItem drops its position, action and flush list (see syncItem).
func compactItem(it item) syncItem {
	return syncItem{id: it.id, kind: it.kind, typ: it.typ, side: it.side}
}

// item returns x as an item reported at pos.
func (x syncItem) item(pos *dsl.Range) item {
	return item{kind: x.kind, typ: x.typ, side: x.side, id: x.id, pos: pos}
}
