package ir

// OpCode identifies a plan op. The order is the kernel's op enum
// (kernels/ generate their enum from this table), so append only.
type OpCode uint8

const (
	OpNop OpCode = iota
	OpBarrier
	OpSignal
	OpWait
	OpRlxSignal
	OpRlxWait
	OpFlush
	OpSemAcquire
	OpSemRelease
	OpPut
	OpPws
	OpPwsf
	OpGet
	OpCopy
	OpRe
	OpRes
	OpRre
	OpRres
	OpPpkt
	OpRppkt
	OpCpkt
	OpUpkt
	OpRepkt
	OpRespkt
	OpRecpkt
	OpRecspkt
	OpGlres
	OpGstore
	OpGstorepkt
	OpPipeline
	NumOps
)

// OpClass groups ops by what they do; executors and the validator switch
// on it before looking at the individual op.
type OpClass uint8

const (
	ClassSync    OpClass = iota // no data: nop, barrier, signal, wait, flush, semaphores
	ClassData                   // Simple-protocol data movement and reductions
	ClassPacket                 // LL packet ops
	ClassSwitch                 // NVLink multicast
	ClassControl                // pipeline
)

// ChanMask is a set of channel types.
type ChanMask uint8

// Has reports whether t is in the mask.
func (m ChanMask) Has(t ChannelType) bool { return m&(1<<t) != 0 }

const (
	MaskNone   ChanMask = 0
	MaskMemory ChanMask = 1 << ChanMemory
	MaskPort   ChanMask = 1 << ChanPort
	MaskSwitch ChanMask = 1 << ChanSwitch
)

// RefMask is a set of buffer reference kinds.
type RefMask uint8

// Has reports whether k is in the mask.
func (m RefMask) Has(k RefKind) bool { return m&(1<<k) != 0 }

const (
	Local  RefMask = 1 << RefLocal
	Remote RefMask = 1 << RefRemote
	Switch RefMask = 1 << RefSwitch
)

// Operand describes one of an op's buffer lists (src_buff or dst_buff).
// First constrains element 0, Rest the elements after it; Min/Max bound
// the length (Max 0 means the list must be absent or empty).
type Operand struct {
	Min, Max    int
	First, Rest RefMask
	// Second, when not zero, constrains element 1 instead of Rest
	// (recspkt: dst[1] is a local packet copy, dst[2:] are remote).
	Second RefMask
	// Packet says the referenced bytes hold LL packets (element 0 when
	// PacketFirst, elements 1.. when PacketRest).
	PacketFirst, PacketRest bool
}

// Kinds returns the reference kinds element k of the list may use.
func (o Operand) Kinds(k int) RefMask {
	switch {
	case k == 0:
		return o.First
	case k == 1 && o.Second != 0:
		return o.Second
	}
	return o.Rest
}

// OpInfo is one row of the op table.
type OpInfo struct {
	Code  OpCode
	Name  string
	Class OpClass
	// Chans is the set of allowed channel_type values; MaskNone means the
	// op takes no channel_type.
	Chans ChanMask
	// ChannelIDs: the op addresses channels by channel_ids (signal, wait,
	// port puts). Memory-channel data ops address peers through remote
	// buffer ids instead.
	ChannelIDs ChanMask
	Src, Dst   Operand
	Reduces    bool // takes reduce_op (sum when absent)
	Semaphores bool // takes semaphore_ids
	TBG        bool // may carry tbg_info
	// Paired: src_buff[k] is copied to dst_buff[k], so both lists have the
	// same length (upstream's put/get handlers index both with one k).
	Paired bool
	// FanOut: a Paired op that may also have a single src_buff, copied to
	// every dst_buff (rppkt: upstream's handleReadPutPackets reads
	// src_buff[0] once and puts it to each dst_buff[k]). See PairsOK and
	// PairedSrc.
	FanOut bool
	// PortSrcPacket: over port channels the proxy copies the src bytes as
	// they are, so they must already be packets (upstream's port ppkt
	// sends what a cpkt packed into scratch; its memory ppkt packs itself).
	// Op.IsPacketSrc applies it; every executor asks that.
	PortSrcPacket bool
	// Signals: the op signals each of its channels (for the data ops,
	// after the copy on that channel), so each needs a partner whose
	// wait consumes it.
	Signals bool
	// CrossNode: over a port channel the op may write a rank on another
	// node (the proxy carries it over the network); every other op needs
	// its ranks' memory mapped.
	CrossNode bool
	Doc       string
}

const maxRefs = MaxRefsPerOp

var none = Operand{}

// opTable is the single source of truth for ops: the codec, validator,
// text dump, CPU executor and CUDA kernel enum are all driven by it.
var opTable = [NumOps]OpInfo{
	OpNop:        {Name: "nop", Class: ClassSync, Doc: "barrier among the threads of one block"},
	OpBarrier:    {Name: "barrier", Class: ClassSync, Doc: "barrier among num_threadblocks blocks of one rank"},
	OpSignal:     {Name: "signal", Class: ClassSync, Signals: true, Chans: MaskMemory | MaskPort, ChannelIDs: MaskMemory | MaskPort, Doc: "release-signal each channel"},
	OpWait:       {Name: "wait", Class: ClassSync, Chans: MaskMemory | MaskPort, ChannelIDs: MaskMemory | MaskPort, Doc: "acquire-wait on each channel"},
	OpRlxSignal:  {Name: "rlxsignal", Class: ClassSync, Signals: true, Chans: MaskMemory | MaskPort, ChannelIDs: MaskMemory | MaskPort, Doc: "relaxed signal: orders execution, publishes no data"},
	OpRlxWait:    {Name: "rlxwait", Class: ClassSync, Chans: MaskMemory | MaskPort, ChannelIDs: MaskMemory | MaskPort, Doc: "relaxed wait"},
	OpFlush:      {Name: "flush", Class: ClassSync, Chans: MaskPort, ChannelIDs: MaskPort, Doc: "wait until copies issued on each port channel are done"},
	OpSemAcquire: {Name: "sem_acquire", Class: ClassSync, Semaphores: true, Doc: "decrement each semaphore, waiting while it is zero"},
	OpSemRelease: {Name: "sem_release", Class: ClassSync, Semaphores: true, Doc: "increment each semaphore"},

	OpPut: {Name: "put", Class: ClassData, CrossNode: true, Chans: MaskMemory | MaskPort, ChannelIDs: MaskPort, TBG: true, Paired: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local},
		Dst: Operand{Min: 1, Max: maxRefs, First: Remote, Rest: Remote}, Doc: "copy src[k] to remote dst[k]"},
	OpPws: {Name: "pws", Class: ClassData, Signals: true, CrossNode: true, Chans: MaskPort, ChannelIDs: MaskPort, TBG: true, Paired: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local},
		Dst: Operand{Min: 1, Max: maxRefs, First: Remote, Rest: Remote}, Doc: "put, then signal the same channel"},
	OpPwsf: {Name: "pwsf", Class: ClassData, Signals: true, CrossNode: true, Chans: MaskPort, ChannelIDs: MaskPort, TBG: true, Paired: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local},
		Dst: Operand{Min: 1, Max: maxRefs, First: Remote, Rest: Remote}, Doc: "put, signal, then flush"},
	OpGet: {Name: "get", Class: ClassData, Chans: MaskMemory, TBG: true, Paired: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Remote, Rest: Remote},
		Dst: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local}, Doc: "copy remote src[k] to local dst[k]"},
	OpCopy: {Name: "copy", Class: ClassData, TBG: true,
		Src: Operand{Min: 1, Max: 1, First: Local},
		Dst: Operand{Min: 1, Max: 1, First: Local}, Doc: "local copy"},
	OpRe: {Name: "re", Class: ClassData, Reduces: true, TBG: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local},
		Dst: Operand{Min: 1, Max: 1, First: Local}, Doc: "dst[0] = reduce(src...)"},
	OpRes: {Name: "res", Class: ClassData, Chans: MaskMemory, Reduces: true, TBG: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local},
		Dst: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Remote}, Doc: "dst[0] = reduce(src...); copy it to remote dst[1:]"},
	OpRre: {Name: "rre", Class: ClassData, Chans: MaskMemory, Reduces: true, TBG: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Remote},
		Dst: Operand{Min: 1, Max: 1, First: Local}, Doc: "dst[0] = reduce(src[0], remote src[1:])"},
	OpRres: {Name: "rres", Class: ClassData, Chans: MaskMemory, Reduces: true, TBG: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Remote},
		Dst: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Remote}, Doc: "rre, then copy the result to remote dst[1:]"},

	OpPpkt: {Name: "ppkt", Class: ClassPacket, CrossNode: true, Chans: MaskMemory | MaskPort, ChannelIDs: MaskPort, TBG: true, Paired: true, PortSrcPacket: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local},
		Dst: Operand{Min: 1, Max: maxRefs, First: Remote, Rest: Remote, PacketFirst: true, PacketRest: true}, Doc: "write src[k] as packets into remote dst[k]"},
	OpRppkt: {Name: "rppkt", Class: ClassPacket, CrossNode: true, Chans: MaskMemory | MaskPort, ChannelIDs: MaskPort, TBG: true, Paired: true, FanOut: true,
		Src: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Local, PacketFirst: true, PacketRest: true},
		Dst: Operand{Min: 1, Max: maxRefs, First: Remote, Rest: Remote, PacketFirst: true, PacketRest: true}, Doc: "forward received packets of src[k] (or of src[0] to every dst) to remote dst[k]"},
	OpCpkt: {Name: "cpkt", Class: ClassPacket, TBG: true,
		Src: Operand{Min: 1, Max: 1, First: Local},
		Dst: Operand{Min: 1, Max: 1, First: Local, PacketFirst: true}, Doc: "pack local data into a local packet buffer"},
	OpUpkt: {Name: "upkt", Class: ClassPacket, TBG: true,
		Src: Operand{Min: 1, Max: 1, First: Local, PacketFirst: true},
		Dst: Operand{Min: 1, Max: 1, First: Local}, Doc: "unpack packets (waiting for their flags) into data"},
	OpRepkt: {Name: "repkt", Class: ClassPacket, Reduces: true, TBG: true,
		Src: Operand{Min: 2, Max: maxRefs, First: Local, Rest: Local, PacketRest: true},
		Dst: Operand{Min: 1, Max: 1, First: Local}, Doc: "dst[0] = reduce(src[0], packets src[1:])"},
	OpRespkt: {Name: "respkt", Class: ClassPacket, Chans: MaskMemory, Reduces: true, TBG: true,
		Src: Operand{Min: 2, Max: maxRefs, First: Local, Rest: Local, PacketRest: true},
		Dst: Operand{Min: 1, Max: maxRefs, First: Local, Rest: Remote, PacketRest: true}, Doc: "repkt, then send the result as packets to remote dst[1:]"},
	OpRecpkt: {Name: "recpkt", Class: ClassPacket, Reduces: true, TBG: true,
		Src: Operand{Min: 2, Max: maxRefs, First: Local, Rest: Local, PacketRest: true},
		Dst: Operand{Min: 2, Max: 2, First: Local, Rest: Local, PacketRest: true}, Doc: "repkt, and also pack the result into local packet dst[1]"},
	OpRecspkt: {Name: "recspkt", Class: ClassPacket, Chans: MaskMemory, Reduces: true, TBG: true,
		Src: Operand{Min: 2, Max: maxRefs, First: Local, Rest: Local, PacketRest: true},
		Dst: Operand{Min: 2, Max: maxRefs, First: Local, Second: Local, Rest: Remote, PacketRest: true}, Doc: "recpkt, then send packets to remote dst[2:]"},

	OpGlres: {Name: "glres", Class: ClassSwitch, Chans: MaskSwitch, Reduces: true, TBG: true,
		Src: Operand{Min: 1, Max: 1, First: Switch},
		Dst: Operand{Min: 1, Max: 1, First: Switch}, Doc: "multimem load-reduce then multimem store"},
	OpGstore: {Name: "gstore", Class: ClassSwitch, Chans: MaskSwitch, TBG: true,
		Src: Operand{Min: 1, Max: 1, First: Local},
		Dst: Operand{Min: 1, Max: 1, First: Switch}, Doc: "multimem store of local data"},
	OpGstorepkt: {Name: "gstorepkt", Class: ClassSwitch, Chans: MaskSwitch, TBG: true,
		Src: Operand{Min: 1, Max: 1, First: Local, PacketFirst: true},
		Dst: Operand{Min: 1, Max: 1, First: Switch, PacketFirst: true}, Doc: "multimem store of local packets' payload as packets (upstream reads its source as packets)"},

	OpPipeline: {Name: "pipeline", Class: ClassControl, Doc: "run the inner ops over windows of iter_context.unit_size bytes"},
}

var opByName = func() map[string]OpCode {
	m := make(map[string]OpCode, NumOps)
	for i := range opTable {
		opTable[i].Code = OpCode(i)
		m[opTable[i].Name] = OpCode(i)
	}
	return m
}()

// Info returns the table row of c.
func (c OpCode) Info() *OpInfo {
	if c >= NumOps {
		return &OpInfo{Name: "invalid"}
	}
	return &opTable[c]
}

func (c OpCode) String() string { return c.Info().Name }

// LookupOp maps a JSON op name to its code.
func LookupOp(name string) (OpCode, bool) {
	c, ok := opByName[name]
	return c, ok
}

// Ops returns the whole op table in code order.
func Ops() []OpInfo { return opTable[:] }

// Info returns the table row of the op.
func (o *Op) Info() *OpInfo { return o.Code.Info() }

// PairsOK reports whether a Paired op may have nsrc src_buff and ndst
// dst_buff refs: as many of each, or for a FanOut op one source. Ops that
// are not Paired leave counts to their Operand bounds and always pass.
func (in *OpInfo) PairsOK(nsrc, ndst int) bool {
	return !in.Paired || nsrc == ndst || (in.FanOut && nsrc == 1)
}

// PairedSrc is the src_buff that dst_buff[k] of a Paired op with nsrc
// sources copies: src_buff[k], or the only one of a fan-out. Executors
// use it so that both forms run the same loop.
func PairedSrc(k, nsrc int) int { return min(k, nsrc-1) }

// IsPacketSrc reports whether src[k] of an op with this info holds
// packets over a memory channel or none. It does not know the channel
// type: executors ask Op.IsPacketSrc, which applies the port rule
// (PortSrcPacket) too.
func (in *OpInfo) IsPacketSrc(k int) bool {
	if k == 0 {
		return in.Src.PacketFirst
	}
	return in.Src.PacketRest
}

// IsPacketSrc reports whether src_buff[k] of this op holds LL packets.
// Unlike OpInfo.IsPacketSrc it knows the op's channel type.
func (o *Op) IsPacketSrc(k int) bool {
	in := o.Info()
	return in.IsPacketSrc(k) || (in.PortSrcPacket && o.ChannelType == ChanPort)
}

// SignalsChannels reports whether the op signals the channels it names.
func (o *Op) SignalsChannels() bool { return o.Info().Signals }

// ChannelPerDst reports whether the op sends dst_buff[k] through its
// channel_ids[k]: a data or packet op over a port channel (the proxy
// copies each destination on its own channel, and a pws or pwsf signals
// that channel after it), so it needs a channel per destination.
func (o *Op) ChannelPerDst() bool {
	return o.ChannelType == ChanPort && o.Info().Class != ClassSync
}

// CrossesNodes reports whether the op may write a rank on another node:
// a CrossNode op over a port channel.
func (o *Op) CrossesNodes() bool { return o.ChannelType == ChanPort && o.Info().CrossNode }

// IsPacketDst reports whether dst_buff[k] of this op holds LL packets.
func (o *Op) IsPacketDst(k int) bool { return o.Info().IsPacketDst(k) }

// IsPacketDst reports whether dst[k] holds packets.
func (in *OpInfo) IsPacketDst(k int) bool {
	if k == 0 {
		return in.Dst.PacketFirst
	}
	return in.Dst.PacketRest
}
