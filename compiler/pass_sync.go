package compiler

import (
	"github.com/msccl-go/msccl-go/ir"
)

// insertSync derives the synchronisation of a chunk-level program from its
// data dependencies, walking actions in program order. For every access it
// finds the earlier conflicting accesses (read after write, write after
// read or write) of the same chunk and orders them as the memory model
// (docs/model.md) requires:
//
//   - same block: a nop between the two ops (a flush first when the earlier
//     op is a port put whose source or destination is involved);
//   - same rank, other block: sem_release after / sem_acquire before, on a
//     semaphore dedicated to that pair of blocks;
//   - other rank: signal after / wait before on a channel dedicated to the
//     pair of blocks; relaxed when the earlier access only read.
//
// LL packet reads need nothing (flags). Each rank's host is modelled too:
// at a launch's start it writes the input and has read the output, at its
// end it reads the output and writes the next input, so remote accesses
// are ordered after the start (a signal from a block of that rank at its
// start) and before the end (a wait in a block of that rank at its end).
// Finally, accesses of one launch are checked against the next launch's
// (buffers reused back to back): a pair of ranks left unordered gets a
// start-of-launch handshake. Per block, knowledge of other blocks'
// progress (vector-clock style, one level) drops edges already implied.
//
// Its result is not a form of its own but what channel building reads
// (synced): the pass is one with buildPlan (passes.go), which it hands
// that result to and nothing else.
func insertSync(st *state, p *program) *synced {
	s := newSyncer(st, p)
	if p.explicit {
		return s.explicitItems()
	}
	s.run()
	s.crossLaunch()
	s.materialize()
	s.release()
	return &synced{sync: s, pairs: s.pairs}
}

// synced is what the sync phase hands to channel building: for a
// channel-level program each block's final op list (items, ids
// unresolved); for a chunk-level one the live syncer, which lays each
// block out when channel building asks (a plan of millions of ops never
// holds them all as items); and the channel pairs sync asked for, beyond
// those data ops need.
type synced struct {
	items [][][]item
	sync  *syncer
	pairs *pairSet
}

// syncAndBuild is the sync pass: dependencies to sync ops, then channels,
// remote buffers and semaphores allocated and the plan written.
func syncAndBuild(st *state, p *program) *built { return buildPlan(p, insertSync(st, p)) }

// node is an access-making entity in program order: a host start, an
// action, or a host end.
type node struct {
	rank int
	gid  int32 // global block id; -1 for host nodes
	host int8  // 0 action, 1 start, 2 end
	act  *action
}

// chunkInfo is sync's record of one chunk. A large program has a million
// of them, met in no useful order, so the common case fits in 48 bytes
// with no pointer to chase: the first readers and accesses are inline,
// the rest in more.
type chunkInfo struct {
	lastW int32 // node seq of the last writer, -1 none
	// Readers since the last write: rd holds the first two.
	nrd int32
	rd  [2]int32
	// Every access of the launch, in order: all holds the first four
	// (seq<<1 | write).
	nall    int32
	all     [4]uint32
	wPacket bool
	more    *chunkMore
}

type chunkMore struct {
	readers []int32  // beyond rd
	all     []access // beyond all
}

// reader returns the i-th reader since the last write.
func (ci *chunkInfo) reader(i int32) int32 {
	if i < int32(len(ci.rd)) {
		return ci.rd[i]
	}
	return ci.more.readers[i-int32(len(ci.rd))]
}

func (ci *chunkInfo) addReader(seq int32) {
	if ci.nrd < int32(len(ci.rd)) {
		ci.rd[ci.nrd] = seq
	} else {
		if ci.more == nil {
			ci.more = &chunkMore{}
		}
		ci.more.readers = append(ci.more.readers, seq)
	}
	ci.nrd++
}

func (ci *chunkInfo) addAccess(a access) {
	if ci.nall < int32(len(ci.all)) {
		w := uint32(0)
		if a.write {
			w = 1
		}
		ci.all[ci.nall] = uint32(a.seq)<<1 | w
	} else {
		if ci.more == nil {
			ci.more = &chunkMore{}
		}
		ci.more.all = append(ci.more.all, a)
	}
	ci.nall++
}

// accesses appends the chunk's accesses, in order, to buf.
func (ci *chunkInfo) accesses(buf []access) []access {
	for i := int32(0); i < min(ci.nall, int32(len(ci.all))); i++ {
		buf = append(buf, access{seq: int32(ci.all[i] >> 1), write: ci.all[i]&1 != 0})
	}
	if ci.more != nil {
		buf = append(buf, ci.more.all...)
	}
	return buf
}

type access struct {
	seq   int32
	write bool
}

type keyedNeed struct {
	key int32
	edgeNeed
}

type edgeNeed struct {
	seq  int32
	full bool
}

type syncer struct {
	st        *state
	p         *program  // the program it synchronises
	sems      []semPair // the semaphore pairs sync items name by index
	gid       [][]int32 // [rank][tb]
	blkRank   []int
	blkTB     []int
	nodes     []node
	chunks    [][4][]chunkInfo // [rank][buffer][chunk], beyond diag
	diag      [4]diagTable     // input and output
	fE, fV    []knowMap
	nopPos    []int32  // 2*seq+1 after, 2*seq-1 before
	start     [][]item // per gid
	startWait [][]item
	end       [][]item
	pairs     *pairSet
	rankPairs map[uint64]bool
	// startKnown[g]: the ranks whose start-of-launch signal block g waits
	// for at its start. A block hears from one or two; a list per block
	// beats a map of a hundred thousand entries.
	startKnown [][]rankKnow
	// partners[g]: the blocks that share a channel with block g, with
	// the id of that pair. A block has a handful, so a list beats a map.
	partners [][]partner
	semIDs   map[semPair]int32
	needBuf  []edgeNeed
	bestBuf  []keyedNeed
	sameBuf  []int32
	// touch[(r, p)]: the blocks of rank r whose ops reach rank p.
	touch    map[uint64][]int32 // by touchKey
	lists    syncLists
	pairSlab []chanPair
}

// pushPair is push for the outs lists.
func (s *syncer) pushPair(l []chanPair, k chanPair) []chanPair {
	if l != nil {
		return append(l, k)
	}
	if len(s.pairSlab) == cap(s.pairSlab) {
		s.pairSlab = make([]chanPair, 0, slabSize(cap(s.pairSlab), 1024))
	}
	s.pairSlab = append(s.pairSlab, k)
	n := len(s.pairSlab)
	return s.pairSlab[n-1 : n : n]
}

func b2k(full bool) int8 {
	if full {
		return 2
	}
	return 1
}

func newSyncer(st *state, p *program) *syncer {
	s := &syncer{st: st, p: p, chunks: make([][4][]chunkInfo, p.hdr.ranks),
		pairs: newPairSet(), rankPairs: map[uint64]bool{}, semIDs: map[semPair]int32{}}
	// A rank with no work may still have to serve its host (signal that a
	// launch started, wait for peers' writes before it ends): give every
	// rank a block up front, since block numbering must not change later.
	for r := range p.blocks {
		if len(p.blocks[r]) == 0 {
			p.blocks[r] = []*block{{rank: r, tb: 0}}
		}
	}
	s.regBlocks()
	// Input and output chunk records in one array each, so that a million
	// of them are not grown one append at a time.
	h := &p.hdr
	for _, bc := range [...]struct {
		buf ir.BufferType
		n   int
	}{{ir.BufInput, h.inChunks}, {ir.BufOutput, h.outChunks}} {
		if bc.n <= 0 {
			continue
		}
		d := &s.diag[bc.buf]
		d.n, d.all = bc.n, make([]chunkInfo, h.ranks*bc.n)
		for i := range d.all {
			d.all[i].lastW = -1
		}
	}
	s.touch = map[uint64][]int32{}
	for _, a := range p.actions {
		for _, refs := range [2][]aref{a.src, a.dst} {
			for _, x := range refs {
				if x.rank == a.rank {
					continue
				}
				g := s.gid[a.rank][a.tb]
				k := touchKey(a.rank, x.rank)
				if l := s.touch[k]; len(l) == 0 || l[len(l)-1] != g {
					s.touch[k] = append(l, g)
				}
			}
		}
	}
	return s
}

// touchKey names the ordered pair of ranks (r, p).
func touchKey(r, p int) uint64 { return uint64(uint32(r))<<32 | uint64(uint32(p)) }

func (s *syncer) regBlocks() {
	p := s.p
	s.gid = make([][]int32, p.hdr.ranks)
	s.blkRank, s.blkTB = s.blkRank[:0], s.blkTB[:0]
	for r, row := range p.blocks {
		s.gid[r] = make([]int32, len(row))
		for tb := range row {
			s.gid[r][tb] = int32(len(s.blkRank))
			s.blkRank = append(s.blkRank, r)
			s.blkTB = append(s.blkTB, tb)
		}
	}
	if s.fE == nil {
		n := len(s.blkRank)
		s.partners = make([][]partner, 0, n)
		s.fE, s.fV, s.nopPos = make([]knowMap, 0, n), make([]knowMap, 0, n), make([]int32, 0, n)
		s.startKnown = make([][]rankKnow, 0, n)
		s.start, s.startWait, s.end = make([][]item, 0, n), make([][]item, 0, n), make([][]item, 0, n)
	}
	for len(s.partners) < len(s.blkRank) {
		s.partners = append(s.partners, nil)
	}
	for len(s.fE) < len(s.blkRank) {
		s.fE = append(s.fE, knowMap{})
		s.fV = append(s.fV, knowMap{})
		s.nopPos = append(s.nopPos, -1)
		s.start = append(s.start, nil)
		s.startWait = append(s.startWait, nil)
		s.end = append(s.end, nil)
		s.startKnown = append(s.startKnown, nil)
	}
}

// blockOn returns a block of rank r to act for its host, preferring one
// already paired with gid other; it creates an empty block if the rank has
// none.
func (s *syncer) blockOn(r int, other int32) int32 {
	p := s.p
	or, ot := s.blkRank[other], s.blkTB[other]
	best := int32(-1)
	for _, pt := range s.partners[other] {
		g := pt.g
		if s.blkRank[g] == r && (best < 0 || g < best) {
			best = g
		}
	}
	if best >= 0 {
		return best
	}
	// Else a block that already works with that rank: the one with the
	// same number if it does, otherwise the least connected, so that the
	// host's channels spread over blocks (16 per block at most).
	if cands := s.touch[touchKey(r, or)]; len(cands) > 0 {
		best := cands[0]
		for _, g := range cands {
			if s.blkTB[g] == ot {
				return g
			}
			if len(s.partners[g]) < len(s.partners[best]) {
				best = g
			}
		}
		return best
	}
	// No channel yet: the block with the same number is the likeliest
	// partner of later edges (blocks often mirror each other across ranks).
	if ot < len(p.blocks[r]) {
		return s.gid[r][ot]
	}
	return s.gid[r][0]
}

func (s *syncer) chanType(a, b int) ir.ChannelType {
	h := &s.p.hdr
	if a/h.gpusPerNode == b/h.gpusPerNode {
		return h.intra
	}
	return h.inter
}

// edge orders node p before node c (full: with data visibility).
func (s *syncer) edge(p, c int32, full bool) {
	pn, cn := &s.nodes[p], &s.nodes[c]
	// The consumer's block: a host end is served by one of its rank's blocks.
	cg := cn.gid
	var pg int32
	if pn.host == 1 {
		if cg < 0 {
			return // host to host of another rank: never needed
		}
		pg = s.blockOn(pn.rank, cg)
	} else {
		pg = pn.gid
	}
	if cn.host == 2 {
		cg = s.blockOn(cn.rank, pg)
	}
	// A host start is known once anything of that block is: actions have
	// sequence numbers above every host node's.
	pseq := p
	if pn.host == 1 {
		pseq = 0
	}
	know := &s.fE[cg]
	if full {
		know = &s.fV[cg]
	}
	if v, ok := know.get(pg); ok && v >= pseq {
		return
	}
	pr, ptb := s.blkRank[pg], s.blkTB[pg]
	cr, ctb := s.blkRank[cg], s.blkTB[cg]
	var sig, wait item
	if pr == cr {
		sid := s.semID(semPair{rank: pr, from: ptb, to: ctb})
		sig, wait = item{kind: itemSemRelease, id: sid}, item{kind: itemSemAcquire, id: sid}
	} else {
		k := pairKey(pr, ptb, cr, ctb, s.chanType(pr, cr))
		// Blocks that share a channel already have exactly this pair
		// (edges and handshakes pair blocks by their ranks' channel type);
		// most edges of a long schedule reuse one.
		pid := s.pairOf(pg, cg)
		if pid < 0 {
			pid = s.addPair(k)
		}
		sig, wait = pairItem(itemRlxSignal, k, pid, pr), pairItem(itemRlxWait, k, pid, cr)
		if full {
			sig.kind, wait.kind = itemSignal, itemWait
		}
		if pn.host == 0 && pn.act.chType == ir.ChanPort && k.typ == ir.ChanPort {
			// Only port data ops read outs, and only their port pairs
			// (dataPairs): a million memory puts need not keep theirs.
			l := pn.act.ownLinks()
			l.outs = s.pushPair(l.outs, k)
		}
	}
	// Source positions: the producer's op for the signal, the consumer's
	// for the wait (a host end is reported at the producer).
	if pn.act != nil {
		sig.pos = pn.act.pos
	}
	wait.pos = sig.pos
	if cn.act != nil {
		wait.pos = cn.act.pos
	}
	if sig.pos == nil {
		sig.pos = wait.pos
	}
	switch pn.host {
	case 1:
		s.start[pg] = append(s.start[pg], sig)
	default:
		s.lists.addPost(p, pn.act, compactItem(sig))
		s.nopPos[pg] = max(s.nopPos[pg], 2*p+1)
	}
	switch {
	case cn.host == 2:
		s.end[cg] = append(s.end[cg], wait)
	case pn.host == 1:
		// Tokens sent at a block's start come first on their channel, so
		// they must be the first ones waited for too.
		s.startWait[cg] = append(s.startWait[cg], wait)
		s.raiseStart(int32(pr), cg, b2k(full))
	default:
		s.lists.addPre(cn.act, compactItem(wait))
		s.nopPos[cg] = max(s.nopPos[cg], 2*c-1)
	}
	s.fE[cg].raise(pg, pseq)
	if full || pr == cr {
		// Release signals and semaphores carry visibility too.
		s.fV[cg].raise(pg, pseq)
	}
}
