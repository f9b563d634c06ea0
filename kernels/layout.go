package kernels

import (
	"encoding/binary"
	"fmt"
)

// Byte sizes of the device structs; Source asserts them with static_assert.
const (
	OpBytes      = 32
	RefBytes     = 16
	HeaderBytes  = 16
	ArgsBytes    = 136
	ChanBytes    = 32
	WatchBytes   = 48
	BarrierBytes = 8
	argsRankOff  = 128
)

// Ref flags.
const (
	RefScratch = 1 // add the launch's scratch half offset
	RefPacket  = 2 // the range holds LL packets (twice the payload bytes)
)

// FIFO request kinds, as channels.cuh writes them into the tag word.
const (
	FifoPut    = 1
	FifoSignal = 2
	FifoFlush  = 3
)

// Op is one entry of a block's op table. Its refs are
// Refs[Ref0 : Ref0+NSrc+NDst] (sources first); its channel or semaphore
// ids Idx[Idx0 : Idx0+NIdx]. A pipeline op is followed by its NPipe body
// ops, which run NIter times over windows of Unit bytes.
type Op struct {
	Code, NSrc, NDst, NIdx  uint8
	Reduce, ChanType, NPipe uint8
	Ref0, Idx0              uint16
	Barrier, NumTBs         uint16
	Unit, NIter             uint32
}

// Ref is a resolved buffer reference: the device address where the range
// starts for this block and its payload size in bytes.
type Ref struct {
	Ptr   uint64
	Size  uint32
	Flags uint16
	Peer  int16
}

// Table is one block's program.
type Table struct {
	Ops  []Op
	Refs []Ref
	Idx  []uint16
}

// Encode lays the table out as the kernel reads it: header, ops, refs,
// ids, padded to 16 bytes (the kernel copies it with 16-byte loads).
func (t *Table) Encode() ([]byte, error) {
	if len(t.Ops) > 0xffff || len(t.Refs) > 0xffff || len(t.Idx) > 0xffff {
		return nil, fmt.Errorf("op table too large: %d ops, %d refs, %d ids", len(t.Ops), len(t.Refs), len(t.Idx))
	}
	n := HeaderBytes + OpBytes*len(t.Ops) + RefBytes*len(t.Refs) + 2*len(t.Idx)
	n = (n + 15) &^ 15
	b := make([]byte, n)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(len(t.Ops)))
	le.PutUint32(b[4:], uint32(len(t.Refs)))
	le.PutUint32(b[8:], uint32(len(t.Idx)))
	le.PutUint32(b[12:], uint32(n))
	p := HeaderBytes
	for _, o := range t.Ops {
		b[p], b[p+1], b[p+2], b[p+3] = o.Code, o.NSrc, o.NDst, o.NIdx
		b[p+4], b[p+5], b[p+6] = o.Reduce, o.ChanType, o.NPipe
		le.PutUint16(b[p+8:], o.Ref0)
		le.PutUint16(b[p+10:], o.Idx0)
		le.PutUint16(b[p+12:], o.Barrier)
		le.PutUint16(b[p+14:], o.NumTBs)
		le.PutUint32(b[p+16:], o.Unit)
		le.PutUint32(b[p+20:], o.NIter)
		p += OpBytes
	}
	for _, r := range t.Refs {
		le.PutUint64(b[p:], r.Ptr)
		le.PutUint32(b[p+8:], r.Size)
		le.PutUint16(b[p+12:], r.Flags)
		le.PutUint16(b[p+14:], uint16(r.Peer))
		p += RefBytes
	}
	for _, x := range t.Idx {
		le.PutUint16(b[p:], x)
		p += 2
	}
	return b, nil
}

// Chan is one channel end (memory or port) as the kernel sees it.
type Chan struct {
	Inbound, RemoteInbound, Expected uint64
	Peer                             int32
	Index                            uint32
}

// EncodeChans lays out a rank's channel ends.
func EncodeChans(cs []Chan) []byte {
	b := make([]byte, ChanBytes*len(cs))
	le := binary.LittleEndian
	for i, c := range cs {
		p := i * ChanBytes
		le.PutUint64(b[p:], c.Inbound)
		le.PutUint64(b[p+8:], c.RemoteInbound)
		le.PutUint64(b[p+16:], c.Expected)
		le.PutUint32(b[p+24:], uint32(c.Peer))
		le.PutUint32(b[p+28:], c.Index)
	}
	return b
}

// Args are one rank's launch arguments (the kernel's only parameter points
// to them).
type Args struct {
	Tables, TableOff, Mem, Port, Sems, Barriers  uint64
	FifoEntries, FifoHead, FifoTail, FifoFlushed uint64
	FifoSize                                     uint64
	Epoch, Done, Watch                           uint64
	ScratchHalf, TimeoutNs                       uint64
	Rank, NBlocks                                uint32
}

// Encode lays the arguments out as struct Args in executor.cu.
func (a *Args) Encode() []byte {
	b := make([]byte, ArgsBytes)
	le := binary.LittleEndian
	for i, v := range []uint64{a.Tables, a.TableOff, a.Mem, a.Port, a.Sems, a.Barriers,
		a.FifoEntries, a.FifoHead, a.FifoTail, a.FifoFlushed, a.FifoSize,
		a.Epoch, a.Done, a.Watch, a.ScratchHalf, a.TimeoutNs} {
		le.PutUint64(b[8*i:], v)
	}
	le.PutUint32(b[argsRankOff:], a.Rank)
	le.PutUint32(b[argsRankOff+4:], a.NBlocks)
	return b
}

// WatchRecord is what a block that timed out wrote about itself.
type WatchRecord struct {
	Kind, Rank, Block, Op uint32
	ChanType, Channel     uint32
	Peer                  int32
	Expected, Seen        uint64
}

// Watch kinds.
var watchKinds = [...]string{"", "signal wait", "packet wait", "barrier", "semaphore acquire", "flush", "full port FIFO"}

// What names the kind of wait.
func (w *WatchRecord) What() string {
	if int(w.Kind) < len(watchKinds) && w.Kind > 0 {
		return watchKinds[w.Kind]
	}
	return fmt.Sprintf("wait kind %d", w.Kind)
}

// DecodeWatch reads one record; ok is false when the block did not time out.
func DecodeWatch(b []byte) (WatchRecord, bool) {
	if len(b) < WatchBytes {
		return WatchRecord{}, false
	}
	le := binary.LittleEndian
	w := WatchRecord{
		Kind: le.Uint32(b[0:]), Rank: le.Uint32(b[4:]), Block: le.Uint32(b[8:]), Op: le.Uint32(b[12:]),
		ChanType: le.Uint32(b[16:]), Channel: le.Uint32(b[20:]), Peer: int32(le.Uint32(b[24:])),
		Expected: le.Uint64(b[32:]), Seen: le.Uint64(b[40:]),
	}
	return w, w.Kind != 0
}
