package msccl

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// cudaPort serves port channels of a rank of a cuda job (one process
// per rank, the node's buffers and semaphore words mapped by CUDA IPC in
// the rank's context). The FIFO is mapped host memory the kernel writes
// and the proxy's thread reads; its head word is device memory (the
// kernel's pushes add to it at GPU scope). Puts and signals are copies
// queued on one stream of the proxy's own, so a signal lands only after
// the puts before it: a signal copies the channel's new count from
// portable pinned memory to the peer's inbound word, which no one else
// writes (the proxy counts). A flush waits for the stream.
//
// The stream belongs to a context of the proxy's own where the driver
// gives one: a context's streams share its hardware queues, and a copy
// queued behind the rank's spinning kernel would never run; another
// context's queues are not shared with it. The copies name the rank's
// context (cuMemcpyPeerAsync), where the IPC mappings live.
type cudaPort struct {
	rank *cuda.Context // the rank's: its buffers and the peers' mappings
	// wait makes every put and signal complete before the handler
	// that asked for it returns (a handler of the user's may measure
	// or read what it did); the built-in handler leaves them queued
	// until a flush.
	wait bool

	fifo  *cuda.HostMem  // entries, tail, flushed
	head  cuda.DevicePtr // requests pushed (the kernel's atomic)
	slots *cuda.HostMem  // signal counts being copied, one per slot
	ring  countRing
	sent  map[int]uint64 // signals raised per channel

	own    *cuda.Context // the proxy's context (nil: the rank's is used)
	noOwn  error         // why the driver gave it none
	stream *cuda.Stream
}

// signalSlots is how many signals may be queued between two waits for
// the stream: each copies from a slot of its own until the stream is
// known to have read it.
const signalSlots = 1024

func newCUDAPort(rank *cuda.Context, wait bool) *cudaPort {
	return &cudaPort{rank: rank, wait: wait, ring: countRing{n: signalSlots}, sent: map[int]uint64{}}
}

func (d *cudaPort) alloc(entries uint64) ([]byte, kernels.Fifo, error) {
	var err error
	if d.fifo, err = cuda.HostAllocMapped(int64(kernels.FIFOBytes(entries))); err != nil {
		return nil, kernels.Fifo{}, err
	}
	if d.slots, err = cuda.HostAllocMapped(8 * signalSlots); err != nil {
		return nil, kernels.Fifo{}, err
	}
	if d.head, err = cuda.Malloc(8); err != nil {
		return nil, kernels.Fifo{}, err
	}
	if err := cuda.Memset8(d.head, 0, 8); err != nil {
		return nil, kernels.Fifo{}, err
	}
	return d.fifo.Bytes, fifoAt(uint64(d.fifo.Dev), uint64(d.head), entries), nil
}

// begin makes the proxy's context current on its locked thread (or
// keeps the rank's where the driver refuses another, as it may under
// MPS) and the stream there.
func (d *cudaPort) begin() error {
	own, err := d.rank.Device().NewContext()
	if err != nil {
		d.noOwn = err
		if err := d.rank.MakeCurrent(); err != nil {
			return err
		}
	}
	d.own = own
	if d.stream, err = cuda.NewStream(true); err != nil {
		return errors.Join(err, d.destroy())
	}
	return nil
}

func (d *cudaPort) end() error {
	var errs []error
	if d.stream != nil {
		errs = append(errs, d.stream.Synchronize(), d.stream.Destroy())
		d.stream = nil
	}
	return errors.Join(append(errs, d.destroy())...)
}

func (d *cudaPort) destroy() error {
	if d.own == nil {
		return nil
	}
	err := d.own.Destroy()
	d.own = nil
	return err
}

func (d *cudaPort) describe() string {
	if d.noOwn == nil {
		return ""
	}
	return fmt.Sprintf("its copies share the rank's context, whose hardware queues a spinning kernel may hold (no context of its own: %v)", d.noOwn)
}

// view is nil: the buffers are device memory, a trigger carries their
// addresses (SrcPtr, DstPtr).
func (d *cudaPort) view(comm.Memory, uint64, uint64) []byte { return nil }

func (d *cudaPort) put(t *Trigger) error {
	if t.Bytes == 0 {
		return nil
	}
	if err := cuda.MemcpyPeerAsync(cuda.DevicePtr(t.DstPtr), d.rank, cuda.DevicePtr(t.SrcPtr), d.rank, int64(t.Bytes), d.stream); err != nil {
		return err
	}
	return d.settle()
}

func (d *cudaPort) signal(ch int, to comm.Loc) error {
	if to.Mem == nil {
		return fmt.Errorf("channel %d: the peer's semaphore is not mapped here", ch)
	}
	slot, full := d.ring.take()
	if full {
		if err := d.complete(); err != nil {
			return err
		}
		slot, _ = d.ring.take()
	}
	d.sent[ch]++
	atomic.StoreUint64(d.slots.Word(int64(8*slot)), d.sent[ch])
	if err := cuda.MemcpyPeerAsync(cuda.DevicePtr(locAddr(to)), d.rank, d.slots.Dev+cuda.DevicePtr(8*slot), d.rank, 8, d.stream); err != nil {
		return err
	}
	return d.settle()
}

// settle waits for what was just queued when the handler is the user's.
func (d *cudaPort) settle() error {
	if !d.wait {
		return nil
	}
	return d.complete()
}

func (d *cudaPort) complete() error {
	if err := d.stream.Synchronize(); err != nil {
		return err
	}
	d.ring.reset()
	return nil
}

func (d *cudaPort) free() error {
	var errs []error
	if d.head != 0 {
		errs = append(errs, cuda.Free(d.head))
		d.head = 0
	}
	for _, m := range []**cuda.HostMem{&d.fifo, &d.slots} {
		if *m != nil {
			errs = append(errs, (*m).Free())
			*m = nil
		}
	}
	return errors.Join(errs...)
}

// countRing hands out the signal slots: a slot is taken once between two
// waits for the stream (reset), since the copy that reads it may not
// have run yet; reusing one earlier would let an older signal carry a
// newer count, ahead of the puts that count covers.
type countRing struct {
	n, used int
}

// take returns the next free slot, or full when all n are in use (wait
// for the stream, reset, take again).
func (r *countRing) take() (slot int, full bool) {
	if r.used == r.n {
		return 0, true
	}
	r.used++
	return r.used - 1, false
}

func (r *countRing) reset() { r.used = 0 }
