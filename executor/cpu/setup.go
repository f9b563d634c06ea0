package cpu

import (
	"fmt"
	"sort"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// Backing arrays of one rank. In-place plans alias input and output into
// arrMain; the race detector keys on arrays, so aliases conflict as they
// do on a GPU.
const (
	arrMain    = iota // input, or input and output when in place
	arrOut            // output of out-of-place plans
	arrScratch        // scratch (raw bytes: packets take twice their payload)
	numArrs
)

// predefinedScratch is upstream's scratch size under reuse_resources.
const predefinedScratch = 1 << 26

// rref is a resolved buffer reference: whose buffer, which bytes. A
// run holds one per reference of every op of the plan (a 1024-rank ring
// has 14 million ops), so it is kept small: 32 bytes.
type rref struct {
	off, n int64 // payload bytes in the referenced buffer, after tbg_info
	rank   int
	group  int32 // switch references: 1 + the issuing rank's switch channel; 0: none
	typ    ir.BufferType
	packet bool
}

// members returns the ranks of a switch reference's multicast group
// (issuer: the rank whose op holds it), nil for other references.
func (s *sim) members(issuer int, r *rref) []int {
	if r.group == 0 {
		return nil
	}
	return s.ranks[issuer].switches[r.group-1]
}

// rchan is a resolved channel of an op: the issuing rank's flat channel.
type rchan struct {
	flat int32
	typ  ir.ChannelType
}

// rop is a resolved op; pipelines keep their body. What only sync ops
// and pipelines need is behind ropCtl (nil for data ops), which keeps
// the op of a large plan small.
type rop struct {
	code     ir.OpCode
	place    int32 // its place number (sim.place)
	src, dst []rref
	chans    []rchan
	reduce   ir.ReduceOp
	*ropCtl
}

// ropCtl is a semaphore op's, a barrier's or a pipeline's part of a rop.
type ropCtl struct {
	sems      []int
	barrierID int
	numTBs    int
	body      []rop
	iters     int64
	unit      int64
}

// Places are numbered in the order setup resolves the ops, block by
// block (each op, then a pipeline's body ops), then the hosts'. Only the
// hosts' are stored: place finds an op's from its block's first place,
// since a record per op cost 20 bytes of each of a plan's millions.

// addPlace numbers the next place: an op's (pl.Block ≥ 0, during setup)
// or a host's (after).
func (s *sim) addPlace(pl Place) int32 {
	if pl.Block >= 0 {
		s.opPlaces++
		return s.opPlaces - 1
	}
	s.hostPlaces = append(s.hostPlaces, pl)
	return s.opPlaces + int32(len(s.hostPlaces)-1)
}

// place is the Place numbered i.
func (s *sim) place(i int32) Place {
	if i >= s.opPlaces {
		return s.hostPlaces[i-s.opPlaces]
	}
	// The last block whose first place is not past i (blocks without
	// ops share their successor's).
	k := sort.Search(len(s.blocks), func(k int) bool { return s.blocks[k].first > i }) - 1
	b := s.blocks[k]
	off := i - b.first
	pc, inner := int(off), -1
	if b.offs != nil {
		pc = sort.Search(len(b.offs), func(j int) bool { return b.offs[j] > off }) - 1
		if d := off - b.offs[pc]; d > 0 {
			inner = int(d) - 1
		}
	}
	op := &b.plan.Ops[pc]
	if inner >= 0 {
		op = &op.Ops()[inner]
	}
	return Place{Rank: b.rank, Block: b.tb, Op: pc, Inner: inner, OpName: op.Code.String()}
}

// refSlab hands out the small slices of resolved ops from large blocks,
// so that a plan of millions of ops does not cost millions of
// allocations (and their size-class rounding).
type refSlab struct {
	refs  []rref
	chans []rchan
	chunk int // length of a new block; 0: slabLen
}

const slabLen = 4096

func (sl *refSlab) takeRefs(n int) []rref   { return take(&sl.refs, n, sl.chunk) }
func (sl *refSlab) takeChans(n int) []rchan { return take(&sl.chans, n, sl.chunk) }

// reset lets the slab hand out its current blocks again: whatever it
// handed out before is no longer used.
func (sl *refSlab) reset() {
	sl.refs, sl.chans = sl.refs[:0], sl.chans[:0]
}

// take returns an empty slice with room for n from *slab, starting a
// new block when the current one is full.
func take[T any](slab *[]T, n, chunk int) []T {
	if n == 0 {
		return nil
	}
	if chunk == 0 {
		chunk = slabLen
	}
	if len(*slab)+n > cap(*slab) {
		*slab = make([]T, 0, max(chunk, n))
	}
	i := len(*slab)
	*slab = (*slab)[:i+n]
	return (*slab)[i : i : i+n]
}

// chanEnd is one end of a memory or port channel.
type chanEnd struct {
	peer    int
	partner int // flat index of the paired channel at peer; -1 when unpaired
	in      tokenQueue
	got     int // signals consumed by waits so far
}

type rankState struct {
	r               int
	lay             *ir.Layout
	arrs            [numArrs][]byte
	vm              [numArrs]vmap // the range mode's arrays (arrs stay nil)
	vpkt            vmap          // the range mode's packet payload store
	inArr, outArr   int
	inBase, outBase int64
	half            int64 // raw scratch bytes of one half (double scratch) or all of it
	pkt             []byte
	scratchLen      int64 // of arrs[arrScratch], made at its first access
	flags           flagMap
	chans           [2][]chanEnd // [0] memory, [1] port
	switches        [][]int      // flattened (channel, rank group) → member ranks
	switchBuf       []ir.BufferType
	sems            []semaphore
	barriers        map[int]*barrier
	blocks          []*block
	done            int // blocks that finished the current launch
	launch          int
	proxy, host     int // agent ids
	proxyClk        clocks
	proxyEpoch      uint32
	proxyT          float64
	hostClk         clocks
	hostEpoch       uint32
}

// setup builds the simulated machine. Every problem the plan has that
// would stop an executor from loading it comes back as an error naming
// the place.
func (s *sim) setup() error {
	if err := s.checkSize(); err != nil {
		return err
	}
	if err := s.checkMemory(); err != nil {
		return err
	}
	s.ranks = make([]*rankState, len(s.p.GPUs))
	for r := range s.p.GPUs {
		rs, err := s.newRank(r)
		if err != nil {
			return err
		}
		s.ranks[r] = rs
	}
	s.pairChannels()
	return s.placeBlocks()
}

// checkSize refuses a size outside the plan's rule or one that is not
// whole elements, and sets s.in and s.out, the buffer bytes.
func (s *sim) checkSize() error {
	p := s.p
	// Outside its size rule a plan's ops move other byte counts than
	// their operands hold: refuse, as every other entry point does,
	// rather than report a "wrong result" the plan never promised.
	rule, err := p.SizeRule()
	if err != nil {
		return err
	}
	if err := rule.Check(s.opt.Size); err != nil {
		return err
	}
	in, out, err := p.BufferBytes(s.opt.Size)
	if err != nil {
		return err
	}
	s.in, s.out = in, out
	if ds := int64(s.opt.DType.Size()); in%ds != 0 || out%ds != 0 {
		return diag.Errorc(diag.CodeSizeRefused, "buffer sizes %d and %d bytes are not whole %s elements", in, out, s.opt.DType)
	}
	return nil
}

// checkMemory refuses a run whose buffers, packet store and launch
// snapshots would pass Options.MaxMemory, before anything is allocated.
func (s *sim) checkMemory() error {
	p, in, out := s.p, s.in, s.out
	limit := s.opt.MaxMemory
	if limit <= 0 {
		limit = 16 << 30
	}
	total := int64(0)
	kept := int64(s.launches)
	if s.opt.OnLaunch != nil {
		// Streaming holds a launch or two (ranks drift apart by one).
		kept = min(kept, 2)
	}
	for r := range p.GPUs {
		lay, err := p.Layout(r, in, out)
		if err != nil {
			return fmt.Errorf("gpus[%d]: %w", r, err)
		}
		// Buffers, the packet store and a snapshot per launch.
		if s.field == nil {
			// The range mode holds runs, not bytes: its memory grows
			// with the ops, not with the size.
			total += (in+out)*(1+2*kept) + lay.ScratchAlloc*3/2
		}
		if lay.ScratchAlloc < 0 || total > limit || total < 0 {
			return fmt.Errorf("gpus[%d]: simulating this plan at %d bytes needs more than %d bytes of memory (scratch_chunks %d)", r, s.opt.Size, limit, p.GPUs[r].ScratchChunks)
		}
	}
	return nil
}

// newRank lays out rank r: its arrays by the plan's placement (in place
// or not), scratch and packet store, channel ends (unpaired) and
// semaphores.
func (s *sim) newRank(r int) (*rankState, error) {
	p, in, out := s.p, s.in, s.out
	g := &p.GPUs[r]
	lay, err := p.Layout(r, in, out)
	if err != nil {
		return nil, fmt.Errorf("gpus[%d]: %w", r, err)
	}
	if p.ReuseResources && g.ScratchChunks > 0 && lay.MaxChunk() > predefinedScratch/int64(g.ScratchChunks) {
		return nil, fmt.Errorf("gpus[%d]: chunks of %d bytes exceed the reuse_resources scratch share (%d bytes); the simulator does not wrap scratch offsets", r, lay.MaxChunk(), predefinedScratch/int64(g.ScratchChunks))
	}
	rs := &rankState{r: r, lay: lay, barriers: map[int]*barrier{}}
	var lens [numArrs]int64
	switch {
	case !p.InPlace:
		lens[arrMain], lens[arrOut] = in, out
		rs.inArr, rs.outArr = arrMain, arrOut
	case p.Collective.Gathers():
		lens[arrMain] = out
		rs.inBase = int64(r) * in
	case p.Collective.Scatters():
		lens[arrMain] = in
		rs.outBase = int64(r) * out
	default:
		lens[arrMain] = max(in, out)
	}
	lens[arrScratch] = lay.ScratchAlloc
	if s.field != nil {
		s.setupRanges(rs, lens)
	} else {
		// The first input fills an input-only array whole before any
		// op runs (boundary): a recycled one need not be cleared.
		whole := rs.inBase == 0 && in == lens[arrMain] && !s.opt.Symbolic
		rs.arrs[arrMain] = s.opt.Buffers.get(lens[arrMain], !whole)
		if lens[arrOut] > 0 {
			rs.arrs[arrOut] = s.opt.Buffers.get(lens[arrOut], true)
		}
	}
	if s.field == nil {
		// The scratch array holds non-packet data only (packets live
		// in pkt): plans that use scratch through packets alone never
		// touch it, so the byte mode makes (and clears) it at the
		// first access (array); the symbolic mode poisons it now.
		rs.scratchLen = lay.ScratchAlloc
		if s.opt.Symbolic {
			rs.arrs[arrScratch] = s.opt.Buffers.get(lay.ScratchAlloc, true)
		}
		// Packet payloads are read only where this launch's flags
		// say they were written (pktReady), so a recycled store's
		// old bytes can never be seen: no clearing.
		rs.pkt = s.opt.Buffers.get(lay.ScratchAlloc/2, false)
	}
	rs.half = lay.ScratchAlloc
	if p.DoubleScratch {
		rs.half /= 2
	}
	for _, c := range g.Channels {
		if c.Type == ir.ChanSwitch {
			for _, grp := range c.RankGroups {
				rs.switches = append(rs.switches, grp.Ranks)
				rs.switchBuf = append(rs.switchBuf, c.BufferType)
			}
			continue
		}
		if c.Type != ir.ChanMemory && c.Type != ir.ChanPort {
			continue
		}
		for _, peer := range c.ConnectedTo {
			rs.chans[ir.ChanSlot(c.Type)] = append(rs.chans[ir.ChanSlot(c.Type)], chanEnd{peer: peer, partner: -1})
		}
	}
	for _, sm := range g.Semaphores {
		rs.sems = append(rs.sems, semaphore{free: sm.InitValue, init: sm.InitValue})
	}
	return rs, nil
}

// pairChannels pairs the k-th channel A→B with the k-th channel B→A of
// the same type.
func (s *sim) pairChannels() {
	n := len(s.ranks)
	for r, rs := range s.ranks {
		for slot := range rs.chans {
			seen := map[int]int{}
			for i := range rs.chans[slot] {
				peer := rs.chans[slot][i].peer
				k := seen[peer]
				seen[peer]++
				if peer < 0 || peer >= n || peer == r {
					continue
				}
				cnt := 0
				for j, e := range s.ranks[peer].chans[slot] {
					if e.peer == r {
						if cnt == k {
							rs.chans[slot][i].partner = j
							break
						}
						cnt++
					}
				}
			}
		}
	}
}

// placeBlocks resolves every block's ops and numbers the agents.
//
// Agent ids: block b of rank r is b*n + r, then the proxies and the
// hosts. Plans give block b of every rank the same part of the
// schedule (the compiler assigns blocks by step, channels pair the
// k-th with the k-th), so knowledge travels along blocks of one index:
// numbering them adjacently keeps what changes in a join within few
// leaves of the clock's tree (clock.go). Numbering rank by rank took
// 1.1 to 1.6 times the CPU time on 128-rank ring, direct, all-to-all
// and packet plans.
func (s *sim) placeBlocks() error {
	p, n := s.p, len(s.p.GPUs)
	maxTB := 0
	for r := range p.GPUs {
		maxTB = max(maxTB, len(p.GPUs[r].ThreadBlocks))
	}
	for r := range p.GPUs {
		rs := s.ranks[r]
		for b := range p.GPUs[r].ThreadBlocks {
			tb := &p.GPUs[r].ThreadBlocks[b]
			// Every op is resolved here, so that a plan that cannot run
			// is refused before it starts, then dropped: a block
			// resolves its current op again when it reaches it
			// (sim.resolved). Keeping them cost about 190 bytes an op
			// for the whole run, 2.6 GB for a 1024-rank ring.
			first := s.opPlaces
			if _, err := s.resolveOps(r, b, tb, tb.Ops, -1); err != nil {
				return err
			}
			blk := &block{agent: b*n + r, rank: r, tb: b, plan: tb, tab: newTBTable(tb), first: first, offs: pipelineOffsets(tb.Ops), curPC: -1, hdrPC: -1}
			blk.slab.chunk = 4
			rs.blocks = append(rs.blocks, blk)
			s.blocks = append(s.blocks, blk)
		}
		rs.proxy, rs.host = maxTB*n+r, (maxTB+1)*n+r
	}
	s.agents = (maxTB + 2) * n
	s.slab = refSlab{} // setup's resolved ops are garbage now
	return nil
}

// pipelineOffsets returns each op's place offset in its block when the
// block has pipelines (a pipeline's body ops follow it), nil when op i
// is offset i.
func pipelineOffsets(ops []ir.Op) []int32 {
	var offs []int32
	for i := range ops {
		if ops[i].Code == ir.OpPipeline {
			offs = make([]int32, len(ops))
			break
		}
	}
	if offs == nil {
		return nil
	}
	o := int32(0)
	for i := range ops {
		offs[i] = o
		o += 1 + int32(len(ops[i].Ops()))
	}
	return offs
}

// tbTable is a block's channel and remote-buffer tables by channel type.
type tbTable struct {
	chans [4][]int
	bufs  [4][]int
}

func newTBTable(tb *ir.ThreadBlock) *tbTable {
	t := &tbTable{}
	for c := range t.chans {
		t.chans[c] = tb.ChannelTable(ir.ChannelType(c))
		t.bufs[c] = tb.RemoteTable(ir.ChannelType(c))
	}
	return t
}

func (s *sim) resolveOps(r, b int, tb *ir.ThreadBlock, ops []ir.Op, outer int) ([]rop, error) {
	tab := newTBTable(tb)
	res := make([]rop, len(ops))
	for i := range ops {
		pl := Place{Rank: r, Block: b, Op: i, Inner: -1, OpName: ops[i].Code.String()}
		if outer >= 0 {
			pl = Place{Rank: r, Block: b, Op: outer, Inner: i, OpName: ops[i].Code.String()}
		}
		ro, err := s.resolveOp(r, tab, tb, &ops[i], pl, s.addPlace(pl), &s.slab)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pl.Path(), err)
		}
		res[i] = ro
	}
	return res, nil
}

// resolveOp resolves op (place: its number, addPlace), taking its
// references and channels from sl.
func (s *sim) resolveOp(r int, tab *tbTable, tb *ir.ThreadBlock, op *ir.Op, pl Place, place int32, sl *refSlab) (rop, error) {
	ro := rop{code: op.Code, place: place, reduce: op.ReduceOp()}
	switch {
	case op.Code == ir.OpPipeline, op.Code == ir.OpBarrier, op.Code == ir.OpSemAcquire, op.Code == ir.OpSemRelease, len(op.SemaphoreIDs()) > 0:
		ro.ropCtl = &ropCtl{barrierID: op.BarrierID(), numTBs: op.NumTBs()}
	}
	if op.Code >= ir.NumOps {
		return ro, fmt.Errorf("invalid op code %d", op.Code)
	}
	rs := s.ranks[r]
	if op.Code == ir.OpPipeline {
		if pl.Inner >= 0 {
			return ro, fmt.Errorf("nested pipeline")
		}
		if op.Iter() == nil || op.Iter().UnitSize <= 0 || op.Iter().NumChunks < 0 {
			return ro, fmt.Errorf("pipeline needs iter_context with a positive unit_size")
		}
		ro.unit = int64(op.Iter().UnitSize)
		ro.iters = rs.lay.PipelineIters(op.Iter())
		if ro.iters*int64(len(op.Ops())+1) > s.maxSteps {
			return ro, fmt.Errorf("pipeline would run %d iterations of %d ops (unit_size %d is too small for this size)", ro.iters, len(op.Ops()), ro.unit)
		}
		body, err := s.resolveOps(r, pl.Block, tb, op.Ops(), pl.Op)
		if err != nil {
			return ro, err
		}
		ro.body = body
		return ro, nil
	}
	switch ro.reduce {
	case ir.ReduceNone, ir.ReduceSum:
		ro.reduce = s.red
	case ir.ReduceMin, ir.ReduceMax:
	case ir.ReduceProd:
		if s.opt.DType.IsFloat() {
			return ro, fmt.Errorf("reduce_op prod is supported for integer types only, not %s", s.opt.DType)
		}
	default:
		return ro, fmt.Errorf("unknown reduce_op %q", ro.reduce)
	}
	info := op.Info()
	// RefRange slices by the group; a group it cannot slice is refused
	// here first.
	if g := op.TBG(); g != nil && (g.TBGSize < 1 || g.TBID < 0 || g.TBID >= g.TBGSize) {
		return ro, fmt.Errorf("tbg_info tb_id %d out of range for tbg_size %d", g.TBID, g.TBGSize)
	}
	ro.src, ro.dst = sl.takeRefs(len(op.Src)), sl.takeRefs(len(op.Dst))
	for k := range op.Src {
		ref, err := s.resolveRef(r, tab, op, &op.Src[k], op.IsPacketSrc(k))
		if err != nil {
			return ro, fmt.Errorf("src_buff[%d]: %w", k, err)
		}
		ro.src = append(ro.src, ref)
	}
	for k := range op.Dst {
		ref, err := s.resolveRef(r, tab, op, &op.Dst[k], op.IsPacketDst(k))
		if err != nil {
			return ro, fmt.Errorf("dst_buff[%d]: %w", k, err)
		}
		ro.dst = append(ro.dst, ref)
	}
	if len(ro.src) < info.Src.Min || len(ro.dst) < info.Dst.Min {
		return ro, fmt.Errorf("%s needs at least %d src and %d dst buffers", info.Name, info.Src.Min, info.Dst.Min)
	}
	needChans := info.ChannelIDs.Has(op.ChannelType)
	if needChans || len(op.ChannelIDs) > 0 && op.ChannelType != ir.ChanSwitch {
		t := op.ChannelType
		if t != ir.ChanMemory && t != ir.ChanPort {
			return ro, fmt.Errorf("channel_ids need a memory or port channel_type")
		}
		for j, id := range op.ChannelIDs {
			if id < 0 || id >= len(tab.chans[t]) {
				return ro, fmt.Errorf("channel_ids[%d]: block has no %s channel %d", j, t, id)
			}
			flat := tab.chans[t][id]
			if flat < 0 || flat >= len(rs.chans[ir.ChanSlot(t)]) {
				return ro, fmt.Errorf("channel_ids[%d]: gpu has no %s channel %d", j, t, flat)
			}
			if ro.chans == nil {
				ro.chans = sl.takeChans(len(op.ChannelIDs))
			}
			ro.chans = append(ro.chans, rchan{typ: t, flat: int32(flat)})
		}
		if needChans && len(ro.chans) == 0 {
			return ro, fmt.Errorf("%s names no channel", info.Name)
		}
		if op.ChannelPerDst() && len(ro.chans) < len(ro.dst) {
			return ro, fmt.Errorf("port %s needs one channel per dst buffer", info.Name)
		}
	}
	for j, id := range op.SemaphoreIDs() {
		if id < 0 || id >= len(rs.sems) {
			return ro, fmt.Errorf("semaphore_ids[%d]: gpu has no semaphore %d", j, id)
		}
		ro.sems = append(ro.sems, id)
	}
	if op.Code == ir.OpBarrier && op.NumTBs() < 1 {
		return ro, fmt.Errorf("barrier needs num_threadblocks ≥ 1")
	}
	return ro, nil
}

func (s *sim) resolveRef(r int, tab *tbTable, op *ir.Op, br *ir.BufRef, packet bool) (rref, error) {
	rs := s.ranks[r]
	ref := rref{rank: r, packet: packet}
	switch br.Kind {
	case ir.RefLocal:
		ref.typ = br.Type
	case ir.RefRemote:
		t := op.ChannelType
		var table []int
		if int(t) < len(tab.bufs) {
			table = tab.bufs[t]
		}
		var err error
		if ref.rank, ref.typ, err = s.p.RemoteOwner(r, table, t, br.BufferID); err != nil {
			return ref, err
		}
	case ir.RefSwitch:
		ids := tab.chans[ir.ChanSwitch]
		if br.SwitchID < 0 || br.SwitchID >= len(ids) || ids[br.SwitchID] < 0 || ids[br.SwitchID] >= len(rs.switches) {
			return ref, fmt.Errorf("block has no switch channel %d", br.SwitchID)
		}
		g := ids[br.SwitchID]
		ref.group, ref.typ = int32(g+1), rs.switchBuf[g]
		for _, m := range rs.switches[g] {
			if m < 0 || m >= len(s.ranks) {
				return ref, fmt.Errorf("switch channel %d names rank %d of %d", br.SwitchID, m, len(s.ranks))
			}
		}
	}
	if ref.typ == ir.BufNone || ref.typ > ir.BufScratch {
		return ref, fmt.Errorf("no buffer type")
	}
	if br.Index < 0 || br.Size < 0 {
		return ref, fmt.Errorf("negative chunk index or size")
	}
	if br.Index > 1<<24 || br.Size > 1<<24 {
		return ref, fmt.Errorf("chunk index %d or size %d is absurdly large", br.Index, br.Size)
	}
	ref.off, ref.n = rs.lay.RefRange(ref.typ, br, op)
	if ref.off < 0 || ref.n < 0 {
		return ref, fmt.Errorf("chunks [%d, %d) do not map to a byte range", br.Index, br.Index+br.Size)
	}
	if packet && ref.typ != ir.BufScratch {
		return ref, fmt.Errorf("packets live in scratch, not %s", ref.typ.Long())
	}
	check := func(rank int) error {
		o := s.ranks[rank]
		limit := o.lay.BufferSize(ref.typ)
		end := ref.off + ref.n
		if ref.typ == ir.BufScratch {
			limit = o.half
			if packet {
				end *= 2
			}
		}
		if end > limit {
			return fmt.Errorf("chunks [%d, %d) end at byte %d, past the %d bytes of rank %d's %s", br.Index, br.Index+br.Size, end, limit, rank, ref.typ.Long())
		}
		return nil
	}
	if ref.group != 0 {
		for _, m := range s.members(r, &ref) {
			if err := check(m); err != nil {
				return ref, err
			}
		}
		return ref, nil
	}
	return ref, check(ref.rank)
}
