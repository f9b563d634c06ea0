package compiler

import (
	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// chanPair is one channel between two thread blocks of two ranks: block
// tbA of rankA holds one end, tbB of rankB the other (tb -1: no block of
// that rank uses its end, as for a put that needs a channel only to reach
// the peer's memory). Pairs are created on demand and turned into paired
// GPU channel entries by buildPlan. The fields are int32 (ranks stop at
// 2^14, blocks far below 2^31): a large ring holds hundreds of thousands.
type chanPair struct {
	rankA, tbA, rankB, tbB int32
	typ                    ir.ChannelType
}

// packed returns k as one integer, a far cheaper map key than the struct,
// when its fields fit (ranks below 2^14, blocks below 2^16-1, a channel
// type below 8); ok is false otherwise.
func (k chanPair) packed() (uint64, bool) {
	const rankBits, tbBits = 14, 16
	if uint(k.rankA) >= 1<<rankBits || uint(k.rankB) >= 1<<rankBits || uint(k.tbA+1) >= 1<<tbBits || uint(k.tbB+1) >= 1<<tbBits || uint(k.typ) >= 8 {
		return 0, false
	}
	return uint64(k.rankA)<<(rankBits+2*tbBits+3) | uint64(k.rankB)<<(2*tbBits+3) | uint64(k.tbA+1)<<(tbBits+3) | uint64(k.tbB+1)<<3 | uint64(k.typ), true
}

// pairSet is a set of channel pairs in insertion order; a pair's id is
// its position in list.
//
// The maps index list[:indexed] only: sync's walk appends the pairs it
// knows to be new (addNew) without touching them, and the first lookup
// indexes the rest into a map made at its final size. A large ring makes
// a quarter of a million pairs, and growing a map one insert at a time
// cost more than the rest of their handling.
type pairSet struct {
	packed  map[uint64]int32
	slow    map[chanPair]int32 // pairs that do not pack
	list    []chanPair
	indexed int
}

func newPairSet() *pairSet { return &pairSet{} }

// add inserts k if it is new and returns its id.
func (ps *pairSet) add(k chanPair) int32 {
	if id, ok := ps.id(k); ok {
		return id
	}
	id := ps.addNew(k)
	ps.index()
	return id
}

// addNew appends k, which the caller knows is not in the set yet.
func (ps *pairSet) addNew(k chanPair) int32 {
	ps.list = append(ps.list, k)
	return int32(len(ps.list) - 1)
}

// index brings the maps up to date with list. Lookups call it; a caller
// that looks up from several goroutines calls it once before.
func (ps *pairSet) index() {
	if ps.indexed == len(ps.list) {
		return
	}
	if ps.packed == nil {
		ps.packed = make(map[uint64]int32, len(ps.list))
	}
	for i := ps.indexed; i < len(ps.list); i++ {
		k := ps.list[i]
		if pk, ok := k.packed(); ok {
			ps.packed[pk] = int32(i)
			continue
		}
		if ps.slow == nil {
			ps.slow = map[chanPair]int32{}
		}
		ps.slow[k] = int32(i)
	}
	ps.indexed = len(ps.list)
}

// id returns the id of k if it is in the set.
func (ps *pairSet) id(k chanPair) (int32, bool) {
	ps.index()
	if pk, ok := k.packed(); ok {
		id, ok := ps.packed[pk]
		return id, ok
	}
	id, ok := ps.slow[k]
	return id, ok
}

// pairKey normalises a pair so both ends find the same one.
func pairKey(r1, t1, r2, t2 int, typ ir.ChannelType) chanPair {
	if r1 > r2 {
		r1, t1, r2, t2 = r2, t2, r1, t1
	}
	return chanPair{rankA: int32(r1), tbA: int32(t1), rankB: int32(r2), tbB: int32(t2), typ: typ}
}

// semPair is a semaphore of one rank released by block from, acquired by
// block to.
type semPair struct{ rank, from, to int }

type itemKind uint8

const (
	itemAct itemKind = iota
	itemNop
	itemSignal
	itemWait
	itemRlxSignal
	itemRlxWait
	itemSemRelease
	itemSemAcquire
	itemFlush
)

// item is one entry of a block's final op list before ids are resolved.
//
// Millions of items are stored and copied, so they name their channel
// pair or semaphore by id (the state's pairs and sems lists) rather than
// by value.
type item struct {
	kind itemKind
	// Signal/wait: the channel type and which end of the pair the item's
	// block holds (0: rankA, 1: rankB).
	typ  ir.ChannelType
	side uint8
	// id is, for a signal or wait, 1 + the id of its channel in the
	// state's pairs (0: none); for a semaphore op, the semaphore's index
	// in the state's sems. One field for both keeps an item at 32 bytes.
	id    int32
	act   *action
	pairs *[]chanPair // flush: its channels
	pos   *dsl.Range  // source the op is reported at (shared, not copied)
}

// pairItem returns a signal/wait item on pair k (id pid) for the block
// of rank r.
func pairItem(kind itemKind, k chanPair, pid int32, r int) item {
	it := item{kind: kind, typ: k.typ, id: pid + 1}
	if r == int(k.rankB) {
		it.side = 1
	}
	return it
}

// knowMap maps a block to the latest node of it another block knows of.
// A block hears from a handful of others, so a short list (searched in
// place) serves, until it grows long enough to need a map. Entries are
// pairs in one list, first made with room for a few: a large program has
// a quarter of a million of these, and growing two lists one entry at a
// time made a good part of sync's allocations.
type knowMap struct {
	es []knowEntry
	m  map[int32]int32
}

type knowEntry struct{ g, seq int32 }

func (k *knowMap) get(g int32) (int32, bool) {
	if k.m != nil {
		v, ok := k.m[g]
		return v, ok
	}
	for _, e := range k.es {
		if e.g == g {
			return e.seq, true
		}
	}
	return 0, false
}

// raise records that g is known up to seq, if that is later.
func (k *knowMap) raise(g, seq int32) {
	if k.m != nil {
		if v, ok := k.m[g]; !ok || seq > v {
			k.m[g] = seq
		}
		return
	}
	for i := range k.es {
		if e := &k.es[i]; e.g == g {
			e.seq = max(e.seq, seq)
			return
		}
	}
	if len(k.es) < 32 {
		if k.es == nil {
			k.es = make([]knowEntry, 0, 4)
		}
		k.es = append(k.es, knowEntry{g, seq})
		return
	}
	k.m = make(map[int32]int32, 2*len(k.es))
	for _, e := range k.es {
		k.m[e.g] = e.seq
	}
	k.m[g] = seq
	k.es = nil
}

// each calls f for every entry.
func (k *knowMap) each(f func(g, seq int32)) {
	if k.m != nil {
		for g, v := range k.m {
			f(g, v)
		}
		return
	}
	for _, e := range k.es {
		f(e.g, e.seq)
	}
}

// diagTable holds the records of one buffer's n chunks on every rank,
// ordered by diagonal: chunk c of rank r sits at ((c-r) mod n, r).
// Collectives number chunks relative to the rank (a ring's step s moves
// chunk r-s of rank r to rank r+1), so accesses that follow each other in
// program order share a diagonal and land side by side, where a rank by
// rank layout would put each on its own page (a large ring spent more
// time in those cache misses than in the rest of the walk).
type diagTable struct {
	n   int
	all []chunkInfo
}

func (d *diagTable) at(rank, idx int) int {
	ranks := len(d.all) / d.n
	k := (idx - rank) % d.n
	if k < 0 {
		k += d.n
	}
	return k*ranks + rank
}

// each calls f for every record.
func (d *diagTable) each(f func(ci *chunkInfo)) {
	for i := range d.all {
		f(&d.all[i])
	}
}

// rankKnow is one entry of startKnown: block g waits at its start for
// rank's start-of-launch signal, relaxed (k 1) or release (k 2).
type rankKnow struct {
	rank int32
	k    int8
}

// startKnowledge is what block g knows of rank's start (0: nothing).
func (s *syncer) startKnowledge(rank, g int32) int8 {
	for _, e := range s.startKnown[g] {
		if e.rank == rank {
			return e.k
		}
	}
	return 0
}

// raiseStart records that g knows rank's start at least as k.
func (s *syncer) raiseStart(rank, g int32, k int8) {
	s.setStart(rank, g, max(s.startKnowledge(rank, g), k))
}

// setStart records that g knows rank's start as k.
func (s *syncer) setStart(rank, g int32, k int8) {
	l := s.startKnown[g]
	for i := range l {
		if l[i].rank == rank {
			l[i].k = k
			return
		}
	}
	s.startKnown[g] = append(l, rankKnow{rank: rank, k: k})
}
