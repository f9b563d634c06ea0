package msccl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Channels in a user's kernel (docs/primitives.md): a rank allocates a
// Buffer its peers can map, registers it (collective), builds memory
// channels to chosen peers and passes the resulting Handles to its
// kernel (Kernel.Launch). On the cpu device the same calls build the
// same handles over shared memory, with host addresses, which is how CI
// checks registration and pairing without a GPU.

// Buffer is memory of this rank's device that the node's other ranks can
// map: shared memory on the cpu device, exportable device memory on cuda.
type Buffer struct {
	c   *RankComm
	mem comm.Memory
}

// buffers are the live Buffers of every RankComm, by base address, for
// Register to find the allocation behind a Mem.
var buffers sync.Map // bufKey → *Buffer

type bufKey struct {
	c    *RankComm
	addr uint64
}

// AllocBuffer allocates size bytes, zeroed, that Register can share.
func (c *RankComm) AllocBuffer(size int64) (*Buffer, error) {
	var m comm.Memory
	err := c.do(func() (err error) {
		m, err = c.c.Device().Alloc(size)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("msccl: AllocBuffer: %w", err)
	}
	b := &Buffer{c: c, mem: m}
	buffers.Store(bufKey{c, memAddr(m)}, b)
	return b, nil
}

// Mem is the buffer as a collective's or a kernel's argument.
func (b *Buffer) Mem() Mem {
	if h, ok := b.mem.(interface{ Bytes() []byte }); ok {
		return HostMem(h.Bytes())
	}
	return DeviceMem(cuda.DevicePtr(memAddr(b.mem)), b.mem.Size())
}

// DevicePtr is the buffer's device address (0 on the cpu device), as a
// kernel argument.
func (b *Buffer) DevicePtr() DevicePtr {
	if _, ok := b.mem.(interface{ Ptr() cuda.DevicePtr }); ok {
		return cuda.DevicePtr(memAddr(b.mem))
	}
	return 0
}

// Addr is the buffer's address in this process: its device address on
// cuda, its host address on the cpu device (what Register takes back
// from a caller across the C ABI).
func (b *Buffer) Addr() uintptr { return uintptr(memAddr(b.mem)) }

// Close frees the buffer; peers keep their mappings until they close
// their Registrations.
func (b *Buffer) Close() error {
	buffers.Delete(bufKey{b.c, memAddr(b.mem)})
	return b.c.do(b.mem.Close)
}

// Do runs f with the rank's CUDA context current on the calling thread
// (locked to it meanwhile), for driver calls of the user's own: a
// Kernel's Launch, a stream's Synchronize, a copy. On the cpu device it
// just calls f.
func (c *RankComm) Do(f func() error) error { return c.do(f) }

// do runs f in the rank's CUDA context (directly on the cpu device).
func (c *RankComm) do(f func() error) error {
	if c.gpu != nil {
		return c.gpu.Context().Do(f)
	}
	return f()
}

// memAddr is the address of a Memory as this process (and, for device
// memory, its kernels) sees it.
func memAddr(m comm.Memory) uint64 {
	switch v := m.(type) {
	case interface{ Ptr() cuda.DevicePtr }:
		return uint64(v.Ptr())
	case interface{ Bytes() []byte }:
		if b := v.Bytes(); len(b) > 0 {
			return uint64(uintptr(unsafe.Pointer(&b[0])))
		}
	}
	return 0
}

func locAddr(l comm.Loc) uint64 {
	if l.Mem == nil {
		return 0
	}
	return memAddr(l.Mem) + uint64(l.Off)
}

// Registration is a buffer of this rank shared with the ranks of its
// node, and theirs mapped here.
type Registration struct {
	c   *RankComm
	buf *Buffer
	r   *comm.Registered
}

// Register shares buf with every rank of the node (collective: every
// rank calls it). buf must be (the whole of) a Buffer from AllocBuffer:
// that memory the device can export without a copy. Other memory is
// refused with the reason, on every rank alike: a Go slice, or memory
// from C, is private to this process; device memory this communicator
// did not allocate has no export handle it can give.
func (c *RankComm) Register(ctx context.Context, buf Mem) (*Registration, error) {
	b, why := c.findBuffer(buf)
	if err := c.agree(ctx, "Register", why); err != nil {
		return nil, err
	}
	var r *comm.Registered
	err := c.do(func() (err error) {
		r, err = c.c.RegisterBuffer(ctx, b.mem)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("msccl: Register: %w", err)
	}
	return &Registration{c: c, buf: b, r: r}, nil
}

// findBuffer is the Buffer buf is, or why there is none.
func (c *RankComm) findBuffer(buf Mem) (*Buffer, string) {
	var addr uint64
	switch {
	case buf.n == 0 || buf.lenOnly:
		return nil, "the buffer is empty"
	case buf.gpu && c.gpu == nil:
		return nil, "device memory on the cpu device"
	case !buf.gpu && c.gpu != nil:
		return nil, "host memory on the cuda device: register device memory from AllocBuffer"
	case buf.gpu:
		addr = uint64(buf.dev)
	default:
		addr = uint64(uintptr(unsafe.Pointer(&buf.host[0])))
	}
	v, ok := buffers.Load(bufKey{c, addr})
	if !ok {
		if buf.gpu {
			return nil, fmt.Sprintf("device memory at %#x was not allocated by AllocBuffer: this build exports only memory it allocated (its own IPC or VMM handle), so registering it would need a copy", addr)
		}
		return nil, "host memory of this process (a Go slice, or memory from C) cannot be mapped by the other ranks' processes: allocate it with AllocBuffer (shared memory)"
	}
	b := v.(*Buffer)
	if buf.n != b.mem.Size() {
		return nil, fmt.Sprintf("%d bytes of a %d-byte buffer: register the whole buffer and use offsets", buf.n, b.mem.Size())
	}
	return b, ""
}

// agree tells every rank whether each could go on (why == "": yes), so
// that a refusal on one rank is an error on all instead of a hang in the
// collective that follows.
func (c *RankComm) agree(ctx context.Context, what, why string) error {
	all, err := c.c.Bootstrap().AllGather(ctx, []byte(why))
	if err != nil {
		return fmt.Errorf("msccl: %s: %w", what, err)
	}
	var errs []error
	for r, w := range all {
		if len(w) > 0 {
			errs = append(errs, fmt.Errorf("rank %d: %s", r, w))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("msccl: %s refused: %w", what, errors.Join(errs...))
	}
	return nil
}

// Close unmaps the peers' buffers (the local Buffer stays the caller's).
func (r *Registration) Close() error { return r.c.do(r.r.Close) }

// Handles are an array of channel handles ready for a kernel: on the
// cuda device in device memory (a *Handles argument of Kernel.Launch
// passes its address), on the cpu device in host memory (Bytes). They
// own the channels' semaphores and the watchdog's records.
type Handles struct {
	c      *RankComm
	n      int
	image  []byte
	dev    cuda.DevicePtr
	chans  *comm.UserChannels
	watch  []byte        // the records (on cuda wmem.Bytes)
	wmem   *cuda.HostMem // mapped host memory of the records (cuda)
	watchv kernels.Watch
	port   *portProxy // port channels: the proxy serving their FIFO
}

// HandleWatchBlocks is how many blocks' watchdog records Handles keep:
// block b of a kernel writes record b mod HandleWatchBlocks.
const HandleWatchBlocks = 1024

// HandleTimeout is how long a wait in a user's kernel spins before its
// watchdog ends it and writes its record.
const HandleTimeout = 10 * time.Second

// MemoryChannels builds one memory channel to each of peers (a peer may
// appear several times; the k-th channel from A to B pairs with the k-th
// from B to A). Collective: every rank calls it. local is the
// registration a channel's puts read from (src); remote the one they
// write into at the peer (dst), which is also where the peer's packets
// land here (packets).
func (c *RankComm) MemoryChannels(ctx context.Context, peers []int, local, remote *Registration) (*Handles, error) {
	h, err := c.userChannels(ctx, "MemoryChannels", "", peers, local, remote)
	if err != nil {
		return nil, err
	}
	err = c.do(func() error {
		watch, err := h.newWatch()
		if err != nil {
			return err
		}
		hs := make([]kernels.MemoryChannelHandle, len(peers))
		for i, ch := range h.chans.Chans {
			hs[i] = kernels.MemoryChannelHandle{
				Sem: kernels.SemaphoreHandle{Chan: kernels.Chan{
					Inbound: locAddr(ch.Inbound), RemoteInbound: locAddr(ch.Remote), Expected: locAddr(ch.Expected),
					Peer: int32(ch.Peer), Index: uint32(i),
				}, Watch: watch},
				Dst:     memAddr(remote.r.Peers[ch.Peer]),
				Src:     memAddr(local.r.Local),
				Packets: memAddr(remote.r.Local),
			}
		}
		return place(h, hs)
	})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("msccl: MemoryChannels: %w", err)
	}
	return h, nil
}

// Watch is the handles' watchdog (records, timeout, rank), for a kernel
// argument msccl::Watch of the grid barrier or a semaphore of its own:
// Check reports what it records too.
func (h *Handles) Watch() kernels.Watch { return h.watchv }

// userChannels agrees with every rank that the call can go on (why, or
// a registration that is missing or not this communicator's, refuses it
// on all) and connects the channels' semaphores.
func (c *RankComm) userChannels(ctx context.Context, what, why string, peers []int, local, remote *Registration) (*Handles, error) {
	switch {
	case why != "":
	case local == nil || remote == nil:
		why = "no local or remote registration"
	case local.c != c || remote.c != c:
		why = "a registration of another communicator"
	}
	if err := c.agree(ctx, what, why); err != nil {
		return nil, err
	}
	chans, err := c.c.UserChannels(ctx, peers)
	if err != nil {
		return nil, fmt.Errorf("msccl: %s: %w", what, err)
	}
	return &Handles{c: c, n: len(peers), chans: chans}, nil
}

// newWatch allocates the watchdog records (mapped host memory on cuda)
// and returns the msccl::Watch the handles carry. In the rank's context.
func (h *Handles) newWatch() (kernels.Watch, error) {
	records := int64(HandleWatchBlocks * kernels.WatchBytes)
	var waddr uint64
	if h.c.gpu != nil {
		m, err := cuda.HostAllocMapped(records)
		if err != nil {
			return kernels.Watch{}, err
		}
		h.wmem, h.watch, waddr = m, m.Bytes, uint64(m.Dev)
	} else {
		h.watch = make([]byte, records)
		waddr = uint64(uintptr(unsafe.Pointer(&h.watch[0])))
	}
	h.watchv = kernels.Watch{Records: waddr, TimeoutNs: uint64(HandleTimeout), Rank: uint32(h.c.Rank()), NRecords: HandleWatchBlocks}
	return h.watchv, nil
}

// place encodes the handles and, on cuda, copies them to device memory.
// In the rank's context.
func place[T any](h *Handles, hs []T) error {
	img, err := kernels.EncodeHandles(hs)
	if err != nil {
		return err
	}
	h.image = img
	if h.c.gpu == nil || len(img) == 0 {
		return nil
	}
	if h.dev, err = cuda.Malloc(int64(len(img))); err != nil {
		return err
	}
	return cuda.MemcpyHtoD(h.dev, img)
}

// Len is the number of handles.
func (h *Handles) Len() int { return h.n }

// Bytes is the handles' image (kernels.MemoryChannelHandle each).
func (h *Handles) Bytes() []byte { return h.image }

// Ptr is the device address of the array (0 on the cpu device).
func (h *Handles) Ptr() DevicePtr { return h.dev }

// Check reads the watchdog's records: nil when no wait of a kernel that
// used these handles timed out, else an error naming, for each block
// that did, the rank, block, wait, channel, peer and counts. For port
// channels it also reports a failed proxy (the request and why), a
// handler blocked while a wait timed out, and, as an *UnflushedError,
// the channels whose last puts no flush followed: call it once the
// kernel has ended (it waits, up to a second, for the proxy to serve
// what the kernel left in the FIFO).
func (h *Handles) Check() error {
	var errs []error
	for b := 0; b+kernels.WatchBytes <= len(h.watch); b += kernels.WatchBytes {
		w, ok := kernels.DecodeWatch(h.watch[b:])
		if !ok {
			continue
		}
		errs = append(errs, fmt.Errorf("rank %d block %d: %s on channel %d (peer rank %d) timed out after %v: expected %d, saw %d",
			w.Rank, w.Block, w.What(), w.Channel, w.Peer, HandleTimeout, w.Expected, w.Seen))
	}
	if h.port != nil {
		if err := h.port.report(len(errs) > 0); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("msccl: watchdog: %w", errors.Join(errs...))
	}
	return nil
}

// Close stops the port channels' proxy and frees the array, the
// semaphores and the records.
func (h *Handles) Close() error {
	return h.c.do(func() error {
		var errs []error
		if h.port != nil {
			if err := h.port.stop(HandleTimeout); err != nil {
				return err // the handler may still run: keep its memory
			}
			errs = append(errs, h.port.dev.free())
			h.port = nil
		}
		if h.dev != 0 {
			errs = append(errs, cuda.Free(h.dev))
			h.dev = 0
		}
		if h.wmem != nil {
			errs = append(errs, h.wmem.Free())
			h.wmem = nil
		}
		if h.chans != nil {
			errs = append(errs, h.chans.Close())
			h.chans = nil
		}
		return errors.Join(errs...)
	})
}

// HandleAt decodes handle i of a cpu-device array (tests, tools).
func (h *Handles) HandleAt(i int) (kernels.MemoryChannelHandle, error) {
	var m kernels.MemoryChannelHandle
	sz := int(unsafe.Sizeof(m))
	if i < 0 || (i+1)*sz > len(h.image) {
		return m, fmt.Errorf("msccl: handle %d of %d", i, h.n)
	}
	return m, binary.Read(bytes.NewReader(h.image[i*sz:(i+1)*sz]), binary.LittleEndian, &m)
}
