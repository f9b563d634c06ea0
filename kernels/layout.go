package kernels

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The Go structs below mirror the kernel's structs byte for byte (padding
// spelled out as blank fields): each field's c tag names the CUDA member,
// and the generated abi_check.cuh asserts that every member sits at the
// offset unsafe.Offsetof gives here and that the sizes agree. The encoders
// write fields at those same offsets (unsafe.Offsetof), so Go layout, byte encoding and
// CUDA layout are one thing checked twice: TestEncodeIsMemoryImage ties
// the encoders to the Go layout, NVRTC ties the Go layout to the kernel.

// Byte sizes of the device structs.
const (
	OpBytes      = int(unsafe.Sizeof(Op{}))
	RefBytes     = int(unsafe.Sizeof(Ref{}))
	HeaderBytes  = int(unsafe.Sizeof(TableHeader{}))
	ArgsBytes    = int(unsafe.Sizeof(Args{}))
	ChanBytes    = int(unsafe.Sizeof(Chan{}))
	WatchBytes   = int(unsafe.Sizeof(WatchRecord{}))
	BarrierBytes = int(unsafe.Sizeof(BlockBarrier{}))
	StageBytes   = int(unsafe.Sizeof(Stage{}))
)

// Op is one entry of a block's op table (struct DOp). Its refs are
// Refs[Ref0 : Ref0+NSrc+NDst] (sources first); its channel or semaphore
// ids Idx[Idx0 : Idx0+NIdx]. A pipeline op is followed by its NPipe body
// ops, which run NIter times over windows of Unit bytes.
type Op struct {
	Code     uint8  `c:"code"`
	NSrc     uint8  `c:"nsrc"`
	NDst     uint8  `c:"ndst"`
	NIdx     uint8  `c:"nidx"`
	Reduce   uint8  `c:"reduce"`
	ChanType uint8  `c:"chanType"`
	NPipe    uint8  `c:"npipe"`
	_        uint8  // pad0
	Ref0     uint16 `c:"ref0"`
	Idx0     uint16 `c:"idx0"`
	Barrier  uint16 `c:"barrier"`
	NumTBs   uint16 `c:"numTBs"`
	Unit     uint32 `c:"unit"`
	NIter    uint32 `c:"niter"`
	_        [2]uint32
}

// Ref is a resolved buffer reference (struct DRef): the device address
// where the range starts for this block and its payload size in bytes.
type Ref struct {
	Ptr   uint64 `c:"ptr"`
	Size  uint32 `c:"size"`
	Flags uint16 `c:"flags"` // RefScratch, RefPacket
	Peer  int16  `c:"peer"`
}

// TableHeader starts every block's table: counts of what follows and the
// padded byte length.
type TableHeader struct {
	NOps  uint32 `c:"nops"`
	NRefs uint32 `c:"nrefs"`
	NIdx  uint32 `c:"nidx"`
	Bytes uint32 `c:"bytes"`
}

// Table is one block's program.
type Table struct {
	Ops  []Op
	Refs []Ref
	Idx  []uint16
}

var le = binary.LittleEndian

// Encode lays the table out as the kernel reads it: header, ops, refs,
// ids, padded to 16 bytes (the kernel copies it with 16-byte loads).
func (t *Table) Encode() ([]byte, error) {
	if len(t.Ops) > 0xffff || len(t.Refs) > 0xffff || len(t.Idx) > 0xffff {
		return nil, fmt.Errorf("op table too large: %d ops, %d refs, %d ids", len(t.Ops), len(t.Refs), len(t.Idx))
	}
	n := HeaderBytes + OpBytes*len(t.Ops) + RefBytes*len(t.Refs) + 2*len(t.Idx)
	n = (n + 15) &^ 15
	b := make([]byte, n)
	h := TableHeader{NOps: uint32(len(t.Ops)), NRefs: uint32(len(t.Refs)), NIdx: uint32(len(t.Idx)), Bytes: uint32(n)}
	h.put(b)
	p := HeaderBytes
	for i := range t.Ops {
		t.Ops[i].put(b[p:])
		p += OpBytes
	}
	for i := range t.Refs {
		t.Refs[i].put(b[p:])
		p += RefBytes
	}
	for _, x := range t.Idx {
		le.PutUint16(b[p:], x)
		p += 2
	}
	return b, nil
}

func (h *TableHeader) put(b []byte) {
	le.PutUint32(b[unsafe.Offsetof(h.NOps):], h.NOps)
	le.PutUint32(b[unsafe.Offsetof(h.NRefs):], h.NRefs)
	le.PutUint32(b[unsafe.Offsetof(h.NIdx):], h.NIdx)
	le.PutUint32(b[unsafe.Offsetof(h.Bytes):], h.Bytes)
}

func (o *Op) put(b []byte) {
	b[unsafe.Offsetof(o.Code)] = o.Code
	b[unsafe.Offsetof(o.NSrc)] = o.NSrc
	b[unsafe.Offsetof(o.NDst)] = o.NDst
	b[unsafe.Offsetof(o.NIdx)] = o.NIdx
	b[unsafe.Offsetof(o.Reduce)] = o.Reduce
	b[unsafe.Offsetof(o.ChanType)] = o.ChanType
	b[unsafe.Offsetof(o.NPipe)] = o.NPipe
	le.PutUint16(b[unsafe.Offsetof(o.Ref0):], o.Ref0)
	le.PutUint16(b[unsafe.Offsetof(o.Idx0):], o.Idx0)
	le.PutUint16(b[unsafe.Offsetof(o.Barrier):], o.Barrier)
	le.PutUint16(b[unsafe.Offsetof(o.NumTBs):], o.NumTBs)
	le.PutUint32(b[unsafe.Offsetof(o.Unit):], o.Unit)
	le.PutUint32(b[unsafe.Offsetof(o.NIter):], o.NIter)
}

func (r *Ref) put(b []byte) {
	le.PutUint64(b[unsafe.Offsetof(r.Ptr):], r.Ptr)
	le.PutUint32(b[unsafe.Offsetof(r.Size):], r.Size)
	le.PutUint16(b[unsafe.Offsetof(r.Flags):], r.Flags)
	le.PutUint16(b[unsafe.Offsetof(r.Peer):], uint16(r.Peer))
}

// Chan is one channel end, memory or port (struct MemChan).
type Chan struct {
	Inbound       uint64 `c:"inbound"`
	RemoteInbound uint64 `c:"remoteInbound"`
	Expected      uint64 `c:"expected"`
	Peer          int32  `c:"peer"`
	Index         uint32 `c:"index"`
}

func (c *Chan) put(b []byte) {
	le.PutUint64(b[unsafe.Offsetof(c.Inbound):], c.Inbound)
	le.PutUint64(b[unsafe.Offsetof(c.RemoteInbound):], c.RemoteInbound)
	le.PutUint64(b[unsafe.Offsetof(c.Expected):], c.Expected)
	le.PutUint32(b[unsafe.Offsetof(c.Peer):], uint32(c.Peer))
	le.PutUint32(b[unsafe.Offsetof(c.Index):], c.Index)
}

// EncodeChans lays out a rank's channel ends.
func EncodeChans(cs []Chan) []byte {
	b := make([]byte, ChanBytes*len(cs))
	for i := range cs {
		cs[i].put(b[i*ChanBytes:])
	}
	return b
}

// Args are one rank's launch arguments (struct Args; the kernel's only
// parameter points to them). The Fifo* fields are the embedded struct
// Fifo.
type Args struct {
	Tables      uint64 `c:"tables"`
	TableOff    uint64 `c:"tableOff"`
	Mem         uint64 `c:"mem"`
	Port        uint64 `c:"port"`
	Sems        uint64 `c:"sems"`
	Barriers    uint64 `c:"barriers"`
	FifoEntries uint64 `c:"fifo.entries"`
	FifoHead    uint64 `c:"fifo.head"`
	FifoTail    uint64 `c:"fifo.tail"`
	FifoFlushed uint64 `c:"fifo.flushed"`
	FifoSize    uint64 `c:"fifo.size"`
	Epoch       uint64 `c:"epoch"`
	Done        uint64 `c:"done"`
	Watch       uint64 `c:"wd"`
	ScratchHalf uint64 `c:"scratchHalf"`
	TimeoutNs   uint64 `c:"timeoutNs"`
	Rank        uint32 `c:"rank"`
	NBlocks     uint32 `c:"nblocks"`
	Trace       uint64 `c:"trace"`    // traced instances: the rank's TraceHeader+records per block
	TraceCap    uint32 `c:"traceCap"` // records per block
	_           uint32
}

// Encode lays the arguments out as struct Args in executor.cu.
func (a *Args) Encode() []byte {
	b := make([]byte, ArgsBytes)
	for _, f := range [...]struct {
		at uintptr
		v  uint64
	}{
		{unsafe.Offsetof(a.Tables), a.Tables}, {unsafe.Offsetof(a.TableOff), a.TableOff},
		{unsafe.Offsetof(a.Mem), a.Mem}, {unsafe.Offsetof(a.Port), a.Port},
		{unsafe.Offsetof(a.Sems), a.Sems}, {unsafe.Offsetof(a.Barriers), a.Barriers},
		{unsafe.Offsetof(a.FifoEntries), a.FifoEntries}, {unsafe.Offsetof(a.FifoHead), a.FifoHead},
		{unsafe.Offsetof(a.FifoTail), a.FifoTail}, {unsafe.Offsetof(a.FifoFlushed), a.FifoFlushed},
		{unsafe.Offsetof(a.FifoSize), a.FifoSize}, {unsafe.Offsetof(a.Epoch), a.Epoch},
		{unsafe.Offsetof(a.Done), a.Done}, {unsafe.Offsetof(a.Watch), a.Watch},
		{unsafe.Offsetof(a.ScratchHalf), a.ScratchHalf}, {unsafe.Offsetof(a.TimeoutNs), a.TimeoutNs},
	} {
		le.PutUint64(b[f.at:], f.v)
	}
	le.PutUint32(b[unsafe.Offsetof(a.Rank):], a.Rank)
	le.PutUint32(b[unsafe.Offsetof(a.NBlocks):], a.NBlocks)
	le.PutUint64(b[unsafe.Offsetof(a.Trace):], a.Trace)
	le.PutUint32(b[unsafe.Offsetof(a.TraceCap):], a.TraceCap)
	return b
}

// StageSpans is how many input spans, and output spans, one launch of the
// _stage instance copies itself (STAGE_SPANS): Stage is a kernel
// parameter, so its size is fixed. More spans are copied by the host's
// copy engine instead (executor/cuda kstage.go).
const StageSpans = 8

// StageBarrier is the barrier id a block that timed out in the staging
// grid barrier reports (WatchRecord.Channel of WatchBarrier): above every
// plan barrier id.
const StageBarrier = 0xffff

// StageSpan is one copy the kernel makes of a launch's staging (struct
// StageSpan): N bytes from Src to Dst, device addresses.
type StageSpan struct {
	Dst uint64 `c:"dst"`
	Src uint64 `c:"src"`
	N   uint64 `c:"n"`
}

// Stage is the second parameter of the _stage instance (struct Stage),
// passed by value: Grid is the rank's grid barrier (a BlockBarrier), In
// the prologue's copies, Out the epilogue's.
type Stage struct {
	Grid uint64                `c:"grid"`
	NIn  uint32                `c:"nin"`
	NOut uint32                `c:"nout"`
	In   [StageSpans]StageSpan `c:"in"`
	Out  [StageSpans]StageSpan `c:"out"`
}

// WatchRecord is what a block that timed out wrote about itself (struct
// WatchRecord in common.cuh, in mapped host memory).
type WatchRecord struct {
	Kind     WatchKind `c:"kind"`
	Rank     uint32    `c:"rank"`
	Block    uint32    `c:"block"`
	Op       uint32    `c:"op"`
	ChanType uint32    `c:"chanType"`
	Channel  uint32    `c:"channel"`
	Peer     int32     `c:"peer"`
	_        uint32    // pad
	Expected uint64    `c:"expected"`
	Seen     uint64    `c:"seen"`
}

// What names the kind of wait.
func (w *WatchRecord) What() string { return w.Kind.String() }

// DecodeWatch reads one record; ok is false when the block did not time out.
func DecodeWatch(b []byte) (WatchRecord, bool) {
	if len(b) < WatchBytes {
		return WatchRecord{}, false
	}
	var w WatchRecord
	w.Kind = WatchKind(le.Uint32(b[unsafe.Offsetof(w.Kind):]))
	w.Rank = le.Uint32(b[unsafe.Offsetof(w.Rank):])
	w.Block = le.Uint32(b[unsafe.Offsetof(w.Block):])
	w.Op = le.Uint32(b[unsafe.Offsetof(w.Op):])
	w.ChanType = le.Uint32(b[unsafe.Offsetof(w.ChanType):])
	w.Channel = le.Uint32(b[unsafe.Offsetof(w.Channel):])
	w.Peer = int32(le.Uint32(b[unsafe.Offsetof(w.Peer):]))
	w.Expected = le.Uint64(b[unsafe.Offsetof(w.Expected):])
	w.Seen = le.Uint64(b[unsafe.Offsetof(w.Seen):])
	return w, w.Kind != 0
}

// BlockBarrier is one barrier among the blocks of a rank (struct
// BlockBarrier), zeroed by the host.
type BlockBarrier struct {
	Count uint32 `c:"count"`
	Gen   uint32 `c:"gen"`
}

// TraceHeader starts each block's part of a traced rank's timeline buffer
// (struct TraceHeader); TraceCap records follow it.
type TraceHeader struct {
	Count  uint32 `c:"count"` // records the launch wanted; above TraceCap the rest were dropped
	_      uint32
	Launch uint64 `c:"launch"` // the rank's epoch of the recorded launch
}

// TraceRecord is one op a traced kernel ran (struct TraceRecord).
type TraceRecord struct {
	Start uint64 `c:"start"` // %globaltimer ns
	End   uint64 `c:"end"`   // after the block's closing barrier
	Op    uint32 `c:"op"`    // index in the block's op table
	Iter  uint32 `c:"iter"`  // pipeline window
}

// Timeline sizes: TraceBlockBytes(n) is one block's part of a traced
// rank's buffer for n records.
const (
	TraceHeaderBytes = int(unsafe.Sizeof(TraceHeader{}))
	TraceRecordBytes = int(unsafe.Sizeof(TraceRecord{}))
)

// TraceBlockBytes is one block's part of the timeline buffer.
func TraceBlockBytes(records int) int { return TraceHeaderBytes + records*TraceRecordBytes }

// DecodeTrace reads one block's part of a timeline buffer: the launch it
// recorded, its records, and how many were dropped for want of room.
func DecodeTrace(b []byte, records int) (launch uint64, recs []TraceRecord, dropped int) {
	var h TraceHeader
	if len(b) < TraceBlockBytes(records) {
		return 0, nil, 0
	}
	h.Count = le.Uint32(b[unsafe.Offsetof(h.Count):])
	h.Launch = le.Uint64(b[unsafe.Offsetof(h.Launch):])
	n := min(int(h.Count), records)
	recs = make([]TraceRecord, n)
	for i := range recs {
		p, r := b[TraceHeaderBytes+i*TraceRecordBytes:], &recs[i]
		r.Start = le.Uint64(p[unsafe.Offsetof(r.Start):])
		r.End = le.Uint64(p[unsafe.Offsetof(r.End):])
		r.Op = le.Uint32(p[unsafe.Offsetof(r.Op):])
		r.Iter = le.Uint32(p[unsafe.Offsetof(r.Iter):])
	}
	return h.Launch, recs, int(h.Count) - n
}
