package cudadev

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/msccl-go/msccl-go/internal/closeonce"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// IPC chooses how memory is shared with peers.
type IPC int

const (
	// IPCAuto takes VMM where the driver and device support POSIX-fd
	// handles, else legacy handles.
	IPCAuto IPC = iota
	// IPCLegacy: cuMemAlloc memory and cuIpcGetMemHandle's 64 bytes.
	IPCLegacy
	// IPCVMM: cuMemCreate memory exported as a POSIX file descriptor;
	// refused with the reason where the driver or device lacks it.
	IPCVMM
)

func (m IPC) String() string {
	switch m {
	case IPCLegacy:
		return "legacy"
	case IPCVMM:
		return "vmm"
	}
	return "auto"
}

// ParseIPC reads "", "auto", "legacy" or "vmm" (MSCCL_CUDA_IPC).
func ParseIPC(s string) (IPC, error) {
	switch s {
	case "", "auto":
		return IPCAuto, nil
	case "legacy":
		return IPCLegacy, nil
	case "vmm":
		return IPCVMM, nil
	}
	return 0, fmt.Errorf("cudadev: IPC mode %q: want auto, legacy or vmm", s)
}

// Select picks this process's device ordinal among count devices. spec
// is an ordinal, "round-robin" (local rank mod count: several ranks per
// device when there are more ranks than devices, how one GPU hosts a
// whole job), or "" for MSCCL_CUDA_DEVICE, and when that is unset too,
// the local rank itself, which must then name a device.
func Select(spec string, localRank, count int) (int, error) {
	src := "the device choice"
	if spec == "" {
		spec, src = os.Getenv("MSCCL_CUDA_DEVICE"), "MSCCL_CUDA_DEVICE"
	}
	if count <= 0 {
		return 0, fmt.Errorf("cudadev: no CUDA device visible")
	}
	switch spec {
	case "":
		if localRank < 0 {
			return 0, errors.New("cudadev: the local rank is unknown; set MSCCL_CUDA_DEVICE to an ordinal")
		}
		if localRank >= count {
			return 0, fmt.Errorf("cudadev: local rank %d has no device of its own (%d visible); set MSCCL_CUDA_DEVICE=round-robin to place several ranks on one device", localRank, count)
		}
		return localRank, nil
	case "round-robin":
		if localRank < 0 {
			return 0, errors.New("cudadev: round-robin needs the local rank, which is unknown")
		}
		return localRank % count, nil
	}
	n, err := strconv.Atoi(spec)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cudadev: %s %q: want a device ordinal or round-robin", src, spec)
	}
	if n >= count {
		return 0, fmt.Errorf("cudadev: %s %d: only %d device(s) visible", src, n, count)
	}
	return n, nil
}

// Options configure Open.
type Options struct {
	Ordinal int // the device (Select)
	IPC     IPC
}

// Device is one GPU of this process, as the communicator's device.
type Device struct {
	dev  cuda.Device
	ctx  *cuda.Context
	vmm  bool  // allocations are VMM (else cuMemAlloc + legacy IPC)
	gran int64 // VMM granularity
	live atomic.Int64

	mu     sync.Mutex
	closed bool
}

// Open retains the device's primary context, makes it current (and the
// cuda package's fallback context, so every goroutine's driver calls use
// it) and settles how memory is shared.
func Open(o Options) (*Device, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	if o.Ordinal < 0 || o.Ordinal >= n {
		return nil, fmt.Errorf("cudadev: device %d: %d visible", o.Ordinal, n)
	}
	d := &Device{dev: cuda.Device(o.Ordinal)}
	if d.ctx, err = d.dev.PrimaryContext(); err != nil {
		return nil, err
	}
	if err := d.ctx.SetCurrent(); err != nil {
		d.ctx.Release()
		return nil, err
	}
	fail := func(err error) (*Device, error) {
		d.ctx.Release()
		return nil, err
	}
	if o.IPC != IPCLegacy {
		ok, why, err := cuda.VMMSupported(d.dev)
		if err != nil {
			return fail(err)
		}
		if !ok && o.IPC == IPCVMM {
			return fail(fmt.Errorf("cudadev: VMM handles asked for, but %s (use legacy IPC: MSCCL_CUDA_IPC=legacy)", why))
		}
		if ok {
			if d.gran, err = cuda.VMMGranularity(d.dev); err != nil {
				return fail(err)
			}
			d.vmm = true
		}
	}
	return d, nil
}

// Name is "cuda".
func (d *Device) Name() string { return "cuda" }

// Ordinal is the device's ordinal.
func (d *Device) Ordinal() int { return int(d.dev) }

// Context is the device's primary context (current for this process).
func (d *Device) Context() *cuda.Context { return d.ctx }

// IPC says how this device shares its allocations: "vmm" or "legacy".
func (d *Device) IPC() IPC {
	if d.vmm {
		return IPCVMM
	}
	return IPCLegacy
}

// Live counts allocations and imports not yet closed: 0 after a clean
// teardown (tests check it: no leaked IPC mapping).
func (d *Device) Live() int64 { return d.live.Load() }

// Close releases the primary context. Close every Memory first.
func (d *Device) Close() error { return closeonce.Close(&d.mu, &d.closed, d.closeLocked) }

// closeLocked is Close's work, done once with d.mu held.
func (d *Device) closeLocked() error {
	if n := d.live.Load(); n != 0 {
		d.ctx.Release()
		return fmt.Errorf("cudadev: device %d closed with %d allocations or imports still open", int(d.dev), n)
	}
	return d.ctx.Release()
}

// Handle kinds, the first byte of Handle.Data. Both end with the
// allocation's tag (tagBytes), by which an importer in the exporter's own
// process finds the allocation instead of importing it (see local).
const (
	kindLegacy = 1 // then the 64-byte IPC handle, then the size (8 bytes), then the tag
	kindVMM    = 2 // then the size and the mapped size (8 bytes each), then the tag; the FD travels beside
)

// Handle lengths, the kind byte and the tag included.
const (
	tagBytes  = 16
	legacyLen = 1 + 64 + 8 + tagBytes
	vmmLen    = 1 + 8 + 8 + tagBytes
)

// local holds this process's own allocations by tag, for peers that are
// goroutines of the same process (in-process tests, a host running
// several ranks as threads). Such a peer uses the owner's address itself:
// legacy IPC handles cannot be opened by their own process at all, and a
// VMM allocation imported by its own exporter is a second mapping of the
// same memory at another address, which the CUDA guide calls incoherent
// with the first while a grid writing through it runs (docs/rationale.md).
// The owner's memory then lives until the owner and every such alias
// have closed it, as a VMM import keeps the memory of a peer that freed
// its own.
var local sync.Map // [tagBytes]byte -> *Memory (own)

// Memory is device memory: this process's (Alloc) or a peer's (Import).
type Memory struct {
	d    *Device
	ptr  cuda.DevicePtr
	size int64
	own  bool
	vmm  *cuda.VMM // VMM memory
	fd   int       // VMM owner: the exported descriptor peers get copies of; -1 otherwise
	ipc  cuda.IpcMemHandle
	tag  [tagBytes]byte // own memory: its key in local
	// alias is the owner when this is a peer's memory of this very
	// process, used at the owner's address (local).
	alias *Memory

	mu     sync.Mutex
	closed bool
	// refs (own memory): the owner's open reference and its aliases';
	// the memory is freed when the last one closes.
	refs int
}

// Mapping says how this process reaches the memory, for diagnostics:
// "own", "alias of this process's allocation", "vmm import" or "legacy
// import", with the address.
func (m *Memory) Mapping() string {
	how := "legacy import"
	switch {
	case m.own:
		how = "own " + m.d.IPC().String()
	case m.alias != nil:
		how = "alias of this process's own allocation"
	case m.vmm != nil:
		how = "vmm import"
	}
	return fmt.Sprintf("%s at %#x (%d bytes)", how, uint64(m.ptr), m.size)
}

// Owner is the allocation of this process that m is: m itself when this
// process allocated it, the owner when m is an alias of another rank's
// allocation in this process, nil when m was imported from another
// process. Ranks whose memory has an owner here are threads of this
// process, in its one context of the device, and so share its hardware
// queues (executor/cuda orders their launches by it).
func (m *Memory) Owner() *Memory {
	switch {
	case m.own:
		return m
	case m.alias != nil:
		return m.alias
	}
	return nil
}

// Ptr is the memory's address in this process.
func (m *Memory) Ptr() cuda.DevicePtr { return m.ptr }

// Size is the size asked for (the mapping may be larger).
func (m *Memory) Size() int64 { return m.size }

// maxAlloc bounds one allocation (a corrupt size must not reach the driver).
const maxAlloc = 1 << 46

// Alloc allocates size bytes of zeroed device memory that peers can map.
func (d *Device) Alloc(size int64) (comm.Memory, error) {
	if size <= 0 || size > maxAlloc {
		return nil, fmt.Errorf("cuda memory of %d bytes: want 1 to %d", size, int64(maxAlloc))
	}
	m := &Memory{d: d, size: size, own: true, fd: -1, refs: 1}
	if _, err := rand.Read(m.tag[:]); err != nil {
		return nil, fmt.Errorf("cuda memory tag: %w", err)
	}
	if d.vmm {
		v, err := cuda.VMMCreate(d.dev, size)
		if err != nil {
			return nil, err
		}
		m.vmm, m.ptr = v, v.Ptr()
		if m.fd, err = v.ExportFD(); err != nil {
			v.Free()
			return nil, err
		}
	} else {
		p, err := cuda.Malloc(size)
		if err != nil {
			return nil, err
		}
		m.ptr = p
		if m.ipc, err = cuda.IpcGetMemHandle(p); err != nil {
			cuda.Free(p)
			return nil, err
		}
	}
	d.live.Add(1)
	if err := cuda.Memset8(m.ptr, 0, size); err != nil {
		m.Close()
		return nil, err
	}
	local.Store(m.tag, m)
	return m, nil
}

// Export describes the memory for a peer's Import.
func (m *Memory) Export() (comm.Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return comm.Handle{}, errors.New("cuda memory already closed")
	}
	if !m.own {
		return comm.Handle{}, errors.New("cuda memory imported from a peer cannot be exported again")
	}
	if m.vmm != nil {
		b := []byte{kindVMM}
		b = binary.LittleEndian.AppendUint64(b, uint64(m.size))
		b = binary.LittleEndian.AppendUint64(b, uint64(m.vmm.Size()))
		return comm.Handle{Data: append(b, m.tag[:]...), FD: m.fd}, nil
	}
	b := append([]byte{kindLegacy}, m.ipc[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.size))
	return comm.Handle{Data: append(b, m.tag[:]...), FD: -1}, nil
}

// aliasOf returns memory of this process's own allocation with the
// handle's tag, on this device, as a peer's (nil when the handle comes
// from another process, or the allocation is gone or on another device).
func (d *Device) aliasOf(data []byte, size int64) *Memory {
	v, ok := local.Load([tagBytes]byte(data[len(data)-tagBytes:]))
	if !ok {
		return nil
	}
	o := v.(*Memory)
	// Devices of one ordinal share its primary context (Open retains
	// it), so an address of one is valid for every other: the
	// communicators of ranks as goroutines each open their own Device.
	if o.d.dev != d.dev || o.size != size {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refs == 0 {
		return nil
	}
	o.refs++
	d.live.Add(1)
	return &Memory{d: d, ptr: o.ptr, size: o.size, fd: -1, alias: o}
}

// Import maps a peer's memory from its handle; it owns h.FD.
func (d *Device) Import(h comm.Handle) (comm.Memory, error) {
	closeFD := func() {
		if h.FD >= 0 {
			syscall.Close(h.FD)
		}
	}
	if len(h.Data) == 0 {
		closeFD()
		return nil, errors.New("empty cuda memory handle")
	}
	switch h.Data[0] {
	case kindVMM:
		defer closeFD() // the imported handle holds the memory; the descriptor is done with
		if len(h.Data) != vmmLen || h.FD < 0 {
			return nil, fmt.Errorf("cuda VMM handle of %d bytes with descriptor %d, want %d bytes and a descriptor", len(h.Data), h.FD, vmmLen)
		}
		size, mapped := int64(binary.LittleEndian.Uint64(h.Data[1:])), int64(binary.LittleEndian.Uint64(h.Data[9:]))
		if size <= 0 || size > mapped || mapped > maxAlloc+(1<<30) {
			return nil, fmt.Errorf("cuda VMM handle of %d bytes mapped as %d", size, mapped)
		}
		if m := d.aliasOf(h.Data, size); m != nil {
			return m, nil
		}
		v, err := cuda.VMMImport(d.dev, h.FD, mapped)
		if err != nil {
			return nil, err
		}
		d.live.Add(1)
		return &Memory{d: d, ptr: v.Ptr(), size: size, vmm: v, fd: -1}, nil
	case kindLegacy:
		closeFD()
		if len(h.Data) != legacyLen {
			return nil, fmt.Errorf("cuda IPC handle of %d bytes, want %d", len(h.Data), legacyLen)
		}
		size := int64(binary.LittleEndian.Uint64(h.Data[65:]))
		if size <= 0 || size > maxAlloc {
			return nil, fmt.Errorf("cuda IPC handle of %d bytes of memory", size)
		}
		if m := d.aliasOf(h.Data, size); m != nil {
			return m, nil
		}
		p, err := cuda.IpcOpenMemHandle(cuda.IpcMemHandle(h.Data[1:65]))
		if err != nil {
			return nil, err
		}
		d.live.Add(1)
		return &Memory{d: d, ptr: p, size: size, fd: -1}, nil
	}
	closeFD()
	return nil, fmt.Errorf("cuda memory handle of unknown kind %d", h.Data[0])
}

// Close frees (own) or unmaps (imported) the memory; closing twice is
// harmless. A peer's mappings of own memory stay valid for VMM memory
// (the peer holds a handle); legacy IPC memory must outlive its users,
// so free it only after the peers are done (the executors' Free comes
// after a barrier).
func (m *Memory) Close() error { return closeonce.Close(&m.mu, &m.closed, m.closeLocked) }

// closeLocked is Close's work, done once with m.mu held.
func (m *Memory) closeLocked() error {
	m.d.live.Add(-1)
	if m.alias != nil {
		return m.alias.unref()
	}
	if m.own {
		local.Delete(m.tag) // no new aliases; the open ones keep it
		return m.unrefLocked()
	}
	return m.release()
}

// unref drops an alias's reference to its owner m.
func (m *Memory) unref() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unrefLocked()
}

// unrefLocked drops one reference to own memory m (m.mu held) and frees
// it with the last.
func (m *Memory) unrefLocked() error {
	if m.refs <= 0 {
		return errors.New("cuda memory: reference count below zero")
	}
	m.refs--
	if m.refs > 0 {
		return nil
	}
	return m.release()
}

// release frees own memory or unmaps an import.
func (m *Memory) release() error {
	var err error
	switch {
	case m.vmm != nil:
		err = m.vmm.Free()
		if m.fd >= 0 {
			if e := syscall.Close(m.fd); err == nil {
				err = e
			}
			m.fd = -1
		}
	case m.own:
		err = cuda.Free(m.ptr)
	default:
		err = cuda.IpcCloseMemHandle(m.ptr)
	}
	return err
}
