package host

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"sync/atomic"

	"github.com/msccl-go/msccl-go/ir"
)

// Port channels to a rank on another node go through the communicator's
// socket transport (runtime/socket): the proxy sends the bytes a put
// would copy, naming the destination by (buffer set, buffer type,
// scratch half, offset), and the peer's executor writes them into its
// own buffers (NetPut) and raises its own semaphore words (NetSignal).
// Ranks agree on the names without exchanging them: this executor's
// registration space comes from the communicator in Open, and buffer
// sets are numbered in Alloc order, both collective.

// limit is a rank's buffer sizes: what a reference may address, for ranks
// whose memory is mapped here and for ranks on other nodes alike.
type limit struct {
	in, out, half int64
}

// Buffer names on the wire: bit 0 packets (the payload is a 4-byte flag
// and then packet payload, written as LL packets), bit 1 the scratch
// half, bits 2-3 the buffer type, bits 4-15 the buffer set.
const (
	netPacket  = 1
	netHalf    = 2
	netSetBits = 12
)

func netBuf(set uint16, typ ir.BufferType, half int64, packet bool) uint16 {
	b := set<<4 | uint16(typ&3)<<2
	if half != 0 {
		b |= netHalf
	}
	if packet {
		b |= netPacket
	}
	return b
}

// register numbers a new buffer set and makes it reachable from peers on
// other nodes.
func (e *Executor) register(b *Buffers) {
	e.setsMu.Lock()
	defer e.setsMu.Unlock()
	if e.sets == nil {
		e.sets = map[uint16]*Buffers{}
	}
	b.id = e.nextSet
	e.nextSet = (e.nextSet + 1) & (1<<netSetBits - 1)
	e.sets[b.id] = b
}

// unregister makes the set unreachable and its views unusable to puts
// from other nodes, under the lock NetPut writes under: after it returns
// no put touches the memory Free is about to unmap.
func (e *Executor) unregister(b *Buffers) {
	e.setsMu.Lock()
	defer e.setsMu.Unlock()
	if e.sets[b.id] == b {
		delete(e.sets, b.id)
	}
	b.views = nil
}

// set finds buffer set id. A peer that finished its Alloc may send before
// this rank has finished its own (Alloc's agreement on the size is the
// last step they share), so wait for it a while.
func (e *Executor) set(id uint16) (*Buffers, error) {
	deadline := time.Now().Add(e.opt.Timeout)
	for {
		e.setsMu.Lock()
		b := e.sets[id]
		e.setsMu.Unlock()
		if b != nil {
			return b, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("host: rank %d has no buffer set %d", e.rank, id)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// NetPut writes what rank peer put over the socket transport.
func (e *Executor) NetPut(peer int, buf uint16, off uint64, data []byte) error {
	b, err := e.set(buf >> 4)
	if err != nil {
		return err
	}
	typ := ir.BufferType(buf >> 2 & 3)
	var half int64
	if buf&netHalf != 0 {
		half = 1
	}
	e.setsMu.Lock() // Free clears views under unregister's lock
	defer e.setsMu.Unlock()
	if b.views == nil {
		return fmt.Errorf("host: rank %d's buffer set %d is freed", e.rank, buf>>4)
	}
	v := &b.views[e.rank]
	bad := func(what string, n int) error {
		return fmt.Errorf("host: rank %d put %d %s at byte %d of rank %d's %s, outside it", peer, n, what, off, e.rank, typ.Long())
	}
	if buf&netPacket != 0 {
		if typ != ir.BufScratch || len(data) < 4 || (len(data)-4)%4 != 0 || off%4 != 0 {
			return bad("packet bytes", len(data))
		}
		flag, payload := binary.LittleEndian.Uint32(data), data[4:]
		raw := uint64(half*v.half) + 2*off
		if off > uint64(v.half) || raw+2*uint64(len(payload)) > uint64(len(v.scratch)) || uint64(2*len(payload)) > 2*uint64(v.half)-2*off {
			return bad("packet bytes", len(payload))
		}
		if len(payload) > 0 {
			writePkts(unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&v.scratch[raw])), len(payload)/4), payload, flag)
		}
		return nil
	}
	var dst []byte
	switch typ {
	case ir.BufInput:
		dst = v.in
	case ir.BufOutput:
		dst = v.out
	case ir.BufScratch:
		dst = v.scratch[half*v.half : (half+1)*v.half]
	default:
		return bad("bytes", len(data))
	}
	if off > uint64(len(dst)) || uint64(len(data)) > uint64(len(dst))-off {
		return bad("bytes", len(data))
	}
	copy(dst[off:], data)
	return nil
}

// NetSignal raises this rank's port channel ch, which rank peer signalled.
func (e *Executor) NetSignal(peer int, ch uint32) error {
	if int(ch) >= len(e.ends[1]) || e.ends[1][ch].peer != peer {
		return fmt.Errorf("host: rank %d signalled port channel %d of rank %d, which is not a channel to it", peer, ch, e.rank)
	}
	e.ends[1][ch].inbound.Add(1)
	return nil
}
