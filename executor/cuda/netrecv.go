package cudaexec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/msccl-go/msccl-go/internal/socket"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The receiving side of the socket transport on the cuda device (see
// netproxy.go for the sending side). The communicator's connection to a
// peer on another node hands this executor (its registration space) the
// peer's requests in the order sent (comm.NetTarget). A put's chunk is
// copied into pinned staging and from there host → device into this
// rank's buffer on a stream of the peer's own, so the next chunk is read
// from the socket while this one crosses PCIe; a signal first waits for
// that stream (every byte put before it has landed in device memory) and
// only then raises the port channel's inbound word in this rank's sync
// region, by a copy of the new count from pinned memory behind them.

// netStageSlots is how many chunks from one peer may be in flight to the
// device at once.
const netStageSlots = 4

type netRecv struct {
	rank    int
	timeout time.Duration
	ports   []netPort // this rank's port channel ends
	tokens  *netStage // per port channel: the count copied to its inbound word
	counts  []uint64  // per port channel: signals received

	mu     sync.RWMutex
	sets   map[uint16]*RankBuffers
	closed bool
	peers  map[int]*recvPeer
}

// netPort is one port channel end as the receiver sees it: the peer, and
// whether it is on another node, and the inbound word its signals raise.
type netPort struct {
	peer    int
	net     bool
	inbound uint64
}

// recvPeer is one peer's path to the device: its stream and staging.
type recvPeer struct {
	stream netStream // marks: one per staging slot
	stage  [netStageSlots]*netStage
	used   [netStageSlots]bool
	next   int
}

// newNetRecv prepares the staging of every peer on another node that
// ports connect to (allocated now, not while kernels spin).
func newNetRecv(dev netDev, rank int, timeout time.Duration, ports []netPort) (*netRecv, error) {
	r := &netRecv{rank: rank, timeout: timeout, ports: ports, sets: map[uint16]*RankBuffers{},
		peers: map[int]*recvPeer{}, counts: make([]uint64, len(ports))}
	var err error
	if r.tokens, err = dev.stage(8 * max(1, len(ports))); err != nil {
		return nil, err
	}
	for _, pt := range ports {
		if !pt.net || r.peers[pt.peer] != nil {
			continue
		}
		rp := &recvPeer{}
		r.peers[pt.peer] = rp
		if rp.stream, err = dev.stream(netStageSlots); err != nil {
			r.close()
			return nil, err
		}
		for k := range rp.stage {
			if rp.stage[k], err = dev.stage(socket.ChunkBytes); err != nil {
				r.close()
				return nil, err
			}
		}
	}
	return r, nil
}

// relaxed runs f on a thread in relaxed capture mode: the connection's
// reader is a goroutine like any other, and its stream calls must not
// spoil an application's graph capture on another thread (as the pulse's).
func relaxed(f func() error) error {
	defer relaxThread()()
	return f()
}

// relaxThread locks the calling goroutine to its OS thread and puts the
// thread in relaxed capture mode (cuda.RelaxCaptureMode says why); the
// function it returns puts the mode back and unlocks, in that order, as
// the mode is the thread's: defer relaxThread()(). The pulse, the socket
// transport's proxy and its readers all run so.
func relaxThread() (undo func()) {
	runtime.LockOSThread()
	restore, _ := cuda.RelaxCaptureMode()
	return func() {
		restore()
		runtime.UnlockOSThread()
	}
}

// register makes b reachable by its buffer set number.
func (r *netRecv) register(b *RankBuffers) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets[b.netID] = b
}

// unregister makes b unreachable, then waits for the copies into it that
// are in flight, so that its memory may go.
func (r *netRecv) unregister(b *RankBuffers) error {
	r.mu.Lock()
	if r.sets[b.netID] == b {
		delete(r.sets, b.netID)
	}
	r.mu.Unlock()
	return r.sync()
}

func (r *netRecv) sync() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var errs []error
	for _, rp := range r.peers {
		errs = append(errs, rp.stream.sync())
	}
	return errors.Join(errs...)
}

// set finds buffer set id under the read lock, which it returns held. A
// peer that finished its Alloc may send before this rank has registered
// its own (Alloc's agreement on the size is the last step they share),
// so it waits for it a while.
func (r *netRecv) set(id uint16) (*RankBuffers, error) {
	deadline := time.Now().Add(r.timeout)
	for {
		r.mu.RLock()
		if r.closed {
			r.mu.RUnlock()
			return nil, fmt.Errorf("cudaexec: rank %d's executor is closed", r.rank)
		}
		if b := r.sets[id]; b != nil {
			return b, nil
		}
		r.mu.RUnlock()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("cudaexec: rank %d has no buffer set %d", r.rank, id)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// NetPut writes what rank peer put over the socket transport: data at
// byte off of this rank's buffer named buf (buffer set << 2 | type).
func (r *netRecv) NetPut(peer int, buf uint16, off uint64, data []byte) error {
	b, err := r.set(buf >> 2)
	if err != nil {
		return err
	}
	defer r.mu.RUnlock()
	rp := r.peers[peer]
	if rp == nil {
		return fmt.Errorf("cudaexec: rank %d put to rank %d, which has no port channel to it", peer, r.rank)
	}
	bs := &b.bufs[r.rank]
	typ := ir.BufferType(buf & 3)
	base, limit, _ := bs.buffer(typ) // no such type: base 0, refused here
	if base == 0 || off > uint64(limit) || uint64(len(data)) > uint64(limit)-off || len(data) > socket.ChunkBytes {
		return fmt.Errorf("cudaexec: rank %d put %d bytes at byte %d of rank %d's %s buffer (%d bytes), outside it", peer, len(data), off, r.rank, typ.Long(), limit)
	}
	if len(data) == 0 {
		return nil
	}
	return relaxed(func() error {
		k := rp.next
		rp.next = (rp.next + 1) % netStageSlots
		if rp.used[k] {
			if err := rp.stream.wait(k); err != nil {
				return err
			}
		}
		copy(rp.stage[k].host, data)
		if err := rp.stream.copy(base+off, rp.stage[k].addr, int64(len(data))); err != nil {
			return err
		}
		rp.used[k] = true
		return rp.stream.mark(k)
	})
}

// NetSignal raises this rank's port channel ch, which rank peer
// signalled, once every byte peer put before it is in device memory.
func (r *netRecv) NetSignal(peer int, ch uint32) error {
	if int(ch) >= len(r.ports) || r.ports[ch].peer != peer || !r.ports[ch].net {
		return fmt.Errorf("cudaexec: rank %d signalled port channel %d of rank %d, which is not a channel to it", peer, ch, r.rank)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return fmt.Errorf("cudaexec: rank %d's executor is closed", r.rank)
	}
	rp := r.peers[peer]
	return relaxed(func() error {
		if err := rp.stream.sync(); err != nil {
			return err
		}
		// Only this peer's reader writes channel ch's count, and the
		// sync above finished the copy of the previous one.
		r.counts[ch]++
		binary.LittleEndian.PutUint64(r.tokens.host[8*ch:], r.counts[ch])
		return rp.stream.copy(r.ports[ch].inbound, r.tokens.addr+uint64(8*ch), 8)
	})
}

// close refuses further requests, waits for the copies in flight and
// frees the staging.
func (r *netRecv) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for _, rp := range r.peers {
		if rp.stream != nil {
			errs = append(errs, rp.stream.destroy())
		}
		for _, st := range rp.stage {
			if st != nil {
				errs = append(errs, st.free())
			}
		}
	}
	r.peers = map[int]*recvPeer{}
	if r.tokens != nil {
		errs = append(errs, r.tokens.free())
		r.tokens = nil
	}
	return errors.Join(errs...)
}
