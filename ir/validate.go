package ir

import (
	"fmt"
	"slices"
	"strings"

	"github.com/msccl-go/msccl-go/internal/intset"
	"github.com/msccl-go/msccl-go/internal/par"
)

// Validate checks every structural rule of a decoded plan and returns all
// problems found, each with its JSON path. A plan with no errors can be
// handed to any executor: every index it holds is in range, every op has
// the operands the op table asks for, and it fits the upstream executor's
// fixed-size tables. Validate never panics, whatever the plan holds, so it
// is safe on plans built or mutated in memory.
func Validate(p *Plan) Diagnostics {
	if p == nil {
		return Diagnostics{{Code: CodeInvalid, Summary: "no plan"}}
	}
	// Every structure below is per gpu; the count is checked first so
	// that a hostile plan cannot make this allocate before it is refused.
	if n := len(p.GPUs); n > MaxRanks {
		return Diagnostics{{Code: CodeInvalid, Path: "gpus",
			Summary: fmt.Sprintf("plan has %d gpus, more than the %d this toolchain handles", n, MaxRanks)}}
	}
	v := &validator{p: p, flat: make([][numChanTypes][]FlatChannel, len(p.GPUs)), byPeer: make([][numChanTypes]map[int][]int, len(p.GPUs))}
	n := len(p.GPUs)
	workers := par.Workers(n)
	par.ForEach(workers, n, func(_, r int) {
		for t := ChanMemory; t < numChanTypes; t++ {
			v.flat[r][t] = p.GPUs[r].FlatChannels(t)
			if t == ChanSwitch {
				continue
			}
			m := map[int][]int{}
			for j, fc := range v.flat[r][t] {
				m[fc.Peer] = append(m[fc.Peer], j)
			}
			v.byPeer[r][t] = m
		}
	})
	v.plan()
	v.use = make([]usage, n)
	par.ForEach(workers, n, v.gatherUsage)
	// Each rank reports into its own list; joined in rank order they read
	// as one walk over the ranks would have written them.
	per := make([]Diagnostics, n)
	par.ForEach(workers, n, func(_, r int) {
		w := &validator{p: v.p, flat: v.flat, byPeer: v.byPeer, use: v.use}
		w.gpu(r)
		per[r] = w.ds
	})
	for _, ds := range per {
		v.ds = append(v.ds, ds...)
	}
	return v.ds
}

const numChanTypes = ChanSwitch + 1

type validator struct {
	diagSink
	p    *Plan
	flat [][numChanTypes][]FlatChannel // per rank, per channel type
	// byPeer[r][t][q] lists, in order, the indices into flat[r][t] of the
	// channels to rank q: the nth pairs with q's nth back. Partner lookups
	// and counts are then O(1) however many channels a rank has.
	byPeer [][numChanTypes]map[int][]int
	use    []usage // per rank
	sawTBG bool    // an op of the rank being checked has tbg_info
}

func (v *validator) plan() {
	p := v.p
	if len(p.GPUs) == 0 {
		v.errorf("gpus", "plan has no gpus")
	}
	if !knownCollective(p.Collective) {
		v.errorf("collective", "unknown collective %q (want one of %s)", p.Collective, collectiveNames())
	}
	if p.Protocol != Simple && p.Protocol != LL {
		v.errorf("protocol", "unknown protocol %q (want \"Simple\" or \"LL\")", p.Protocol)
	}
	if p.BufferAlignment <= 0 {
		v.errorf("buffer_alignment", "buffer_alignment must be positive, got %d", p.BufferAlignment)
	}
	if p.NumThreadsPerBlock < 1 || p.NumThreadsPerBlock > MaxThreadsPerBlock {
		v.errorf("num_threads_per_block", "num_threads_per_block must be between 1 and %d (CUDA's limit), got %d", MaxThreadsPerBlock, p.NumThreadsPerBlock)
	}
	if p.MinMessageSize > p.MaxMessageSize {
		v.errorf("min_message_size", "min_message_size %d is above max_message_size %d: no message can use this plan", p.MinMessageSize, p.MaxMessageSize)
	}
	v.roles()
}

// roles checks root and peers: each names ranks of this plan and belongs
// to a collective that reads it. A stray one is an error rather than
// ignored, since whoever wrote it expected it to mean something.
func (v *validator) roles() {
	p := v.p
	n := len(p.GPUs)
	if p.Root != 0 {
		switch {
		case !p.Collective.Rooted():
			v.errorf("root", "%s has no root (only broadcast, reduce, gather and scatter do)", p.Collective)
		case p.Root < 0 || p.Root >= n:
			v.errorf("root", "root %d out of range: the plan has %d gpus", p.Root, n)
		}
	}
	if p.Peers == nil {
		return
	}
	if p.Collective != SendRecv {
		v.errorf("peers", "%s has no peer map (only sendrecv does)", p.Collective)
		return
	}
	if len(p.Peers) != n {
		v.errorf("peers", "the peer map has %d entries for %d gpus", len(p.Peers), n)
		return
	}
	from := make([]int, n) // from[q] = 1 + the first rank sending to q
	for r, q := range p.Peers {
		path := fmt.Sprintf("peers[%d]", r)
		switch {
		case q < 0 || q >= n:
			v.errorf(path, "rank %d sends to %d, out of range 0..%d", r, q, n-1)
		case from[q] != 0:
			v.errorf(path, "ranks %d and %d both send to %d: the peer map must be a permutation (every rank receives once)", from[q]-1, r, q)
		default:
			from[q] = r + 1
		}
	}
}

func (v *validator) gpu(r int) {
	g := &v.p.GPUs[r]
	path := fmt.Sprintf("gpus[%d]", r)
	if g.ID != r {
		v.errorf(path+".id", "gpu at position %d has id %d; gpus must be listed in rank order", r, g.ID)
	}
	for _, c := range []struct {
		key string
		n   int
	}{{"input_chunks", g.InputChunks}, {"output_chunks", g.OutputChunks}, {"scratch_chunks", g.ScratchChunks}} {
		if c.n < 0 {
			v.errorf(path+"."+c.key, "%s must not be negative, got %d", c.key, c.n)
		}
	}
	if g.InputChunks <= 0 && g.OutputChunks <= 0 {
		v.errorf(path, "input_chunks and output_chunks are both 0: chunk geometry needs one of them")
	}
	v.channels(r, path)
	v.pairing(r)
	v.remoteBuffers(r, path)
	for i, s := range g.Semaphores {
		if s.InitValue < 0 {
			v.errorf(fmt.Sprintf("%s.semaphores[%d].init_value", path, i), "init_value must not be negative, got %d", s.InitValue)
		}
	}
	for t := range g.ThreadBlocks {
		v.threadBlock(r, t)
	}
	if v.sawTBG {
		// Only ops with tbg_info form groups; most plans have none, and
		// the walk would read every op of the rank once more.
		v.tbgGroups(r)
		v.sawTBG = false
	}
}

func (v *validator) channels(r int, path string) {
	g := &v.p.GPUs[r]
	n := len(v.p.GPUs)
	for e := range g.Channels {
		c := &g.Channels[e]
		cp := fmt.Sprintf("%s.channels[%d]", path, e)
		switch c.Type {
		case ChanMemory, ChanPort:
			if len(c.ConnectedTo) == 0 {
				v.warnf(cp+".connected_to", "%s channel entry connects to no rank", c.Type)
			}
			for k, peer := range c.ConnectedTo {
				switch {
				case peer < 0 || peer >= n:
					v.errorf(fmt.Sprintf("%s.connected_to[%d]", cp, k), "rank %d out of range, plan has %s", peer, count(n, "gpu"))
				case peer == r:
					v.errorf(fmt.Sprintf("%s.connected_to[%d]", cp, k), "rank %d connects a %s channel to itself", r, c.Type)
				}
			}
		case ChanSwitch:
			v.switchChannel(r, e, cp)
		default:
			v.errorf(cp+".channel_type", "channel_type must be memory, port or switch, got %s", c.Type)
		}
	}
}

func (v *validator) switchChannel(r, e int, cp string) {
	p, g := v.p, &v.p.GPUs[r]
	c := &g.Channels[e]
	key := c.BuffKey
	if key == "" {
		key = "buffer_type"
	}
	if c.BufferType < BufInput || c.BufferType > BufScratch {
		v.errorf(cp+"."+key, "switch channel needs a buffer type (\"i\", \"o\" or \"s\")")
	} else if p.chunks(g, c.BufferType) == 0 {
		v.errorf(cp+"."+key, "switch channel over the %s buffer, which has no chunks on rank %d", c.BufferType.Long(), r)
	}
	if len(c.RankGroups) == 0 {
		v.errorf(cp+".rank_groups", "switch channel has no rank groups")
	}
	for k := range c.RankGroups {
		rg := &c.RankGroups[k]
		gp := fmt.Sprintf("%s.rank_groups[%d]", cp, k)
		if rg.Size != len(rg.Ranks) {
			v.warnf(gp+".size", "size %d does not match the %d ranks listed", rg.Size, len(rg.Ranks))
		}
		self := false
		for j, m := range rg.Ranks {
			switch {
			case m < 0 || m >= len(p.GPUs):
				v.errorf(fmt.Sprintf("%s.ranks[%d]", gp, j), "rank %d out of range, plan has %s", m, count(len(p.GPUs), "gpu"))
				continue
			case slices.Contains(rg.Ranks[:j], m):
				v.errorf(fmt.Sprintf("%s.ranks[%d]", gp, j), "rank %d listed twice", m)
				continue
			}
			if m == r {
				self = true
				continue
			}
			if !v.hasSwitchGroup(m, rg.Ranks, c.BufferType) {
				v.errorf(fmt.Sprintf("%s.ranks[%d]", gp, j), "rank %d has no switch channel over ranks %v on its %s buffer; every member must create the multicast group", m, rg.Ranks, c.BufferType.Long())
			}
		}
		if !self {
			v.errorf(gp+".ranks", "rank %d is not a member of its own switch group %v", r, rg.Ranks)
		}
	}
}

// hasSwitchGroup reports whether rank m lists a switch group over the same
// set of ranks and buffer type.
func (v *validator) hasSwitchGroup(m int, ranks []int, bt BufferType) bool {
	for _, fc := range v.flat[m][ChanSwitch] {
		if fc.BufferType == bt && intset.Same(fc.Group.Ranks, ranks) {
			return true
		}
	}
	return false
}

// pairing warns when rank r lists more channels of a type to a peer than
// the peer lists back. Upstream loads such plans (it pads the peer with
// unpaired channels), so this is only a warning; a signal or wait on an
// unpaired channel is an error, reported at the op.
func (v *validator) pairing(r int) {
	n := len(v.p.GPUs)
	for _, t := range []ChannelType{ChanMemory, ChanPort} {
		mine := v.flat[r][t]
		for i, fc := range mine {
			if fc.Peer < 0 || fc.Peer >= n || fc.Peer == r {
				continue
			}
			back := len(v.byPeer[fc.Peer][t][r])
			// Warn once per peer, at the first channel without a partner.
			if fc.Nth == back {
				v.warnf(v.flatPath(r, mine[i]), "rank %d has %s to rank %d but rank %d has %d back; upstream pads rank %d with unpaired channels, and no signal or wait may use the extra ones",
					r, count(len(v.byPeer[r][t][fc.Peer]), t.String()+" channel"), fc.Peer, fc.Peer, back, fc.Peer)
			}
		}
	}
}

func countTo(flat []FlatChannel, peer int) int {
	n := 0
	for _, fc := range flat {
		if fc.Peer == peer {
			n++
		}
	}
	return n
}

func (v *validator) flatPath(r int, fc FlatChannel) string {
	if fc.Peer < 0 {
		return fmt.Sprintf("gpus[%d].channels[%d].rank_groups[%d]", r, fc.Entry, fc.Elem)
	}
	return fmt.Sprintf("gpus[%d].channels[%d].connected_to[%d]", r, fc.Entry, fc.Elem)
}

func (v *validator) remoteBuffers(r int, path string) {
	p, g := v.p, &v.p.GPUs[r]
	for i := range g.RemoteBuffers {
		rb := &g.RemoteBuffers[i]
		// Paths are worded only for a diagnostic: a valid plan has a
		// remote buffer per peer and block, and formatting each path up
		// front was a visible part of an 8-rank compile.
		rp := func(field string) string { return fmt.Sprintf("%s.remote_buffers[%d]%s", path, i, field) }
		rankOK := rb.Rank >= 0 && rb.Rank < len(p.GPUs) && rb.Rank != r
		switch {
		case rb.Rank < 0 || rb.Rank >= len(p.GPUs):
			v.errorf(rp(".rank"), "rank %d out of range, plan has %s", rb.Rank, count(len(p.GPUs), "gpu"))
		case rb.Rank == r:
			v.errorf(rp(".rank"), "remote buffer on rank %d itself; use a local buffer reference", r)
		}
		if rb.Type < BufInput || rb.Type > BufScratch {
			v.errorf(rp(".type"), "remote buffer needs a buffer type (\"i\", \"o\" or \"s\")")
		}
		if len(rb.AccessChannelTypes) == 0 {
			v.warnf(rp(".access_channel_types"), "remote buffer lists no access channel type, so no op can reach it")
		}
		for k, t := range rb.AccessChannelTypes {
			ap := func() string { return rp(fmt.Sprintf(".access_channel_types[%d]", k)) }
			if t != ChanMemory && t != ChanPort {
				v.errorf(ap(), "access channel type must be memory or port, got %s", t)
				continue
			}
			if slices.Contains(rb.AccessChannelTypes[:k], t) {
				v.errorf(ap(), "access channel type %s listed twice", t)
				continue
			}
			if rankOK && len(v.byPeer[r][t][rb.Rank]) == 0 && len(v.byPeer[rb.Rank][t][r]) == 0 {
				v.errorf(ap(), "no %s channel connects rank %d and rank %d, so the buffer cannot be reached over one", t, r, rb.Rank)
			}
		}
	}
}

// Load decodes and validates a plan of at most DefaultMaxPlanBytes. The
// error, when not nil, is a *DiagError listing every problem (or a
// *PlanTooLargeError); warnings come back in the diagnostics either way.
func Load(data []byte) (*Plan, Diagnostics, error) {
	return LoadLimit(data, DefaultMaxPlanBytes)
}

// LoadLimit is Load with another cap on the plan's size in bytes (0 or
// less: DefaultMaxPlanBytes).
func LoadLimit(data []byte, maxBytes int64) (*Plan, Diagnostics, error) {
	if err := checkPlanBytes("the plan", int64(len(data)), maxBytes); err != nil {
		return nil, nil, err
	}
	p, ds := Decode(data)
	if ds.HasErrors() {
		return nil, ds, ds.Err()
	}
	ds = append(ds, Validate(p)...)
	if ds.HasErrors() {
		return nil, ds, ds.Err()
	}
	return p, ds, nil
}

// LoadFile is Load of the plan file at path; its errors name the file.
func LoadFile(path string) (*Plan, Diagnostics, error) {
	data, err := ReadPlanFile(path, DefaultMaxPlanBytes)
	if err != nil {
		return nil, nil, err
	}
	p, ds, err := Load(data)
	if err != nil {
		return nil, ds, fmt.Errorf("%s: %w", path, err)
	}
	return p, ds, nil
}

// count spells "1 chunk", "2 chunks", "0 entries".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
