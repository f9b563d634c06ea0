package ir

// Plan is one execution plan: the same schedule seen from every rank.
// Field names follow the MSCCL++ JSON keys; schema.go maps one to the
// other, for Decode and Encode alike.
type Plan struct {
	Name            string
	Collective      Collective
	Protocol        Protocol
	InPlace         bool
	ReuseResources  bool
	DoubleScratch   bool   // use_double_scratch_buffer
	BufferAlignment int    // bytes; 16 when absent
	MinMessageSize  uint64 // bytes as nccl-tests counts them
	MaxMessageSize  uint64 // ^uint64(0) when absent
	// SizeGranularity (our field, "size_granularity"; upstream ignores
	// it): message sizes must be multiples of it. 0 when absent; the
	// effective rule also follows from the chunk geometry (SizeRule).
	SizeGranularity uint64
	// UniformScratch (our field, "uniform_scratch"; upstream ignores it):
	// scratch slot c starts at c times the largest chunk whatever the
	// split, and an op moves the bytes of its input/output operands, so
	// a chunk of any length fits any slot. Plans compiled here set it;
	// without it scratch takes the reference geometry, as upstream.
	UniformScratch     bool
	NumThreadsPerBlock int // 1024 when absent
	// Root (our field, "root"; upstream ignores it) is the root rank of
	// broadcast, reduce, gather and scatter; 0 when absent, so plans
	// written before it existed keep their meaning.
	Root int
	// Peers (our field, "peers"; upstream ignores it) is sendrecv's peer
	// map: rank r sends its input to rank Peers[r], a permutation. Nil
	// when absent, meaning (r+1) mod n; see Peer.
	Peers []int
	GPUs  []GPU // indexed by rank; GPUs[r].ID == r
}

// Peer is the rank that rank r sends to in a sendrecv plan: Peers[r], or
// (r+1) mod n without a peer map (the convention before peer maps). A
// peer map of the wrong length or an entry out of range (a plan that did
// not pass Validate) reads as the default rather than panicking.
func (p *Plan) Peer(r int) int {
	n := len(p.GPUs)
	if len(p.Peers) == n && r >= 0 && r < n && p.Peers[r] >= 0 && p.Peers[r] < n {
		return p.Peers[r]
	}
	return (r + 1) % max(n, 1)
}

// Collective names the collective a plan implements.
type Collective string

const (
	AllReduce     Collective = "allreduce"
	AllGather     Collective = "allgather"
	ReduceScatter Collective = "reducescatter"
	AllToAll      Collective = "alltoall"
	SendRecv      Collective = "sendrecv"
	Broadcast     Collective = "broadcast"
	// Reduce, Gather and Scatter are ours: upstream's JSON has no such
	// collectives (its executor does not read the name).
	Reduce  Collective = "reduce"
	Gather  Collective = "gather"
	Scatter Collective = "scatter"
)

// Collectives lists every collective the plan format knows.
var Collectives = []Collective{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv, Broadcast, Reduce, Gather, Scatter}

// Rooted reports whether the collective has a root rank (Plan.Root).
func (c Collective) Rooted() bool {
	return c == Broadcast || c == Reduce || c == Gather || c == Scatter
}

// Gathers reports whether the output is n times the input, each rank's
// input being one n-th of it (allgather, gather): in place, rank r's
// input is its output's r-th n-th.
func (c Collective) Gathers() bool { return c == AllGather || c == Gather }

// Scatters reports whether the input is n times the output (reducescatter,
// scatter): in place, rank r's output is its input's r-th n-th.
func (c Collective) Scatters() bool { return c == ReduceScatter || c == Scatter }

// collectiveNames is the list error messages print.
func collectiveNames() string {
	s := ""
	for i, c := range Collectives {
		if i > 0 {
			s += ", "
		}
		s += string(c)
	}
	return s
}

// Protocol is Simple (plain data plus signal/wait) or LL (flagged packets).
type Protocol string

const (
	Simple Protocol = "Simple"
	LL     Protocol = "LL"
)

// GPU is one rank's part of the plan.
type GPU struct {
	ID            int
	InputChunks   int
	OutputChunks  int
	ScratchChunks int
	Channels      []Channel
	RemoteBuffers []RemoteBuffer
	Semaphores    []Semaphore
	ThreadBlocks  []ThreadBlock
}

// ChannelType is the transport of a channel.
type ChannelType uint8

const (
	ChanNone ChannelType = iota
	ChanMemory
	ChanPort
	ChanSwitch
)

var channelTypeNames = [...]string{"none", "memory", "port", "switch"}

func (c ChannelType) String() string { return enumName(channelTypeNames[:], c, "invalid") }

// ParseChannelType maps a JSON channel_type string to its value.
func ParseChannelType(s string) (ChannelType, bool) {
	return parseEnum[ChannelType](channelTypeNames[:], s)
}

// BufferType is one of a rank's three buffers.
type BufferType uint8

const (
	BufNone BufferType = iota
	BufInput
	BufOutput
	BufScratch
)

var bufferTypeNames = [...]string{"", "i", "o", "s"}
var bufferTypeLong = [...]string{"none", "input", "output", "scratch"}

// String is the JSON spelling ("i", "o", "s").
func (b BufferType) String() string { return enumName(bufferTypeNames[:], b, "?") }

// Long is the spelling used in messages ("input", "output", "scratch").
func (b BufferType) Long() string { return enumName(bufferTypeLong[:], b, "invalid") }

// enumName spells v by names (names[i] spells value i), or as bad when
// names has no entry for it.
func enumName[T ~uint8](names []string, v T, bad string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return bad
}

// parseEnum is the value names spells s (the inverse of enumName); an
// empty name spells nothing.
func parseEnum[T ~uint8](names []string, s string) (T, bool) {
	for i, n := range names {
		if n == s && n != "" {
			return T(i), true
		}
	}
	return 0, false
}

// parseBufferType maps "i", "o", "s" to a BufferType.
func parseBufferType(s string) (BufferType, bool) {
	return parseEnum[BufferType](bufferTypeNames[:], s)
}

// Channel is one entry of a GPU's channel list. Memory and port channels
// list one peer per channel in ConnectedTo (each element is a separate
// channel, in order); a switch channel names a buffer and rank groups.
type Channel struct {
	Type        ChannelType
	ConnectedTo []int
	// Switch channels only.
	BufferType BufferType
	BuffKey    string // JSON key the buffer type came from: "buffer_type" (default) or "buff"
	RankGroups []RankGroup
}

// RankGroup is the set of ranks that share one multicast object.
type RankGroup struct {
	Size  int
	Ranks []int
}

// RemoteBuffer is a peer's buffer this rank may access.
type RemoteBuffer struct {
	Rank               int
	Type               BufferType
	AccessChannelTypes []ChannelType
}

// Semaphore is a cross-block counting semaphore of one rank.
type Semaphore struct {
	InitValue int
}

// ThreadBlock is one CUDA block's program.
type ThreadBlock struct {
	ID               int
	Channels         []TBChannel       // TB-local channel table, per channel type
	RemoteBufferRefs []RemoteBufferRef // TB-local remote buffer table, per channel type
	Ops              []Op
}

// TBChannel maps a block's local channel ids (positions in ChannelIDs) of
// one type to indices into the GPU's flattened channel list of that type.
type TBChannel struct {
	Type       ChannelType
	ChannelIDs []int
	Buff       BufferType // optional "buff" key (switch channels in some plans)
}

// RemoteBufferRef maps a block's local remote buffer ids (positions in
// RemoteBufferIDs) for one access channel type to GPU remote_buffers.
type RemoteBufferRef struct {
	AccessChannelType ChannelType
	RemoteBufferIDs   []int
}

// RefKind says how a buffer reference names its buffer.
type RefKind uint8

const (
	RefLocal  RefKind = iota // "type": this rank's i/o/s
	RefRemote                // "buffer_id": TB-local remote buffer id for the op's channel type
	RefSwitch                // "switch_channel_id": TB-local switch channel id
)

// BufRef covers chunks [Index, Index+Size) of one buffer.
type BufRef struct {
	Kind     RefKind
	Type     BufferType // RefLocal
	BufferID int        // RefRemote
	SwitchID int        // RefSwitch
	Index    int
	Size     int
	// Rank is upstream v0.10's "rank" on a switch-channel entry (when
	// HasRank): a member of the channel's group. Multimem addresses every
	// member alike, so executors do not read it; Validate checks it and
	// Encode writes it back.
	Rank    int
	HasRank bool
}

// TBGInfo splits an op's byte ranges across a group of blocks.
type TBGInfo struct {
	TBID    int
	TBGSize int
}

// IterContext drives a pipeline: the body runs over windows of UnitSize
// bytes across NumChunks chunks.
type IterContext struct {
	UnitSize  int
	NumChunks int
}

// ReduceOp is the reduction of a reducing op.
type ReduceOp string

const (
	ReduceNone ReduceOp = ""
	ReduceSum  ReduceOp = "sum"
	ReduceMin  ReduceOp = "min"
	ReduceMax  ReduceOp = "max"
	ReduceProd ReduceOp = "prod"
)

// reduceOps lists the reductions a plan may name.
var reduceOps = []ReduceOp{ReduceSum, ReduceMin, ReduceMax, ReduceProd}
