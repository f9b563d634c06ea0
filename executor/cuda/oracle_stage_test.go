package cudaexec

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The GPU side of the oracle (oracle_test.go) runs serially under gpuMu,
// so its cost adds up over the whole matrix: at 64 MiB a launch moved
// every rank's input to the device twice (eager and graph buffers) and
// both outputs back, and every case pinned (and zeroed, and unpinned) its
// own staging memory under the lock. The helpers here keep the checks and
// halve the traffic: inputs cross PCIe once and are copied device to
// device into the graph's buffers, and the graph's outputs are compared
// with the eager run's on the device (diffKernel), so only the eager
// outputs come back to be compared with the CPU executor byte for byte.
// Graph output == eager output == CPU output is the same check as before.

// stagingPool hands out pinned, mapped host staging buffers and takes
// them back, so that cases staging the same number of bytes pin memory
// once: the 18 types × reductions of a size, and every allreduce at a
// rank count and size, share buffers across configurations. Pinning (and
// zeroing, and unpinning) a GiB takes a while and is done under gpuMu.
// A buffer is kept only while a planned case that has not started yet
// stages exactly as many bytes, and idle buffers stay under a cap, so
// idle pinned memory is bounded. All methods are called with gpuMu held
// (pinning may take driver locks a running plan's proxy needs).
type stagingPool struct {
	expect map[int64]int // planned cases not yet started, by staging bytes
	free   map[int64][]*cuda.HostMem
	idle   int64 // bytes in free
	cap    int64 // most bytes kept idle
}

// staging is the process's pool: its expectations span every
// configuration that has planned its cases.
var staging = &stagingPool{expect: map[int64]int{}, free: map[int64][]*cuda.HostMem{}, cap: envBytes("MSCCL_GPU_STAGING_IDLE", 8<<30)}

// plan records that a case will stage n bytes.
func (sp *stagingPool) plan(n int64) { sp.expect[n]++ }

// cancel withdraws a planned case that will not stage after all.
func (sp *stagingPool) cancel(n int64) {
	if sp.expect[n] > 0 {
		sp.expect[n]--
	}
	sp.trim(n)
}

// get returns a buffer of n bytes (its contents are stale: callers
// overwrite every byte they read).
func (sp *stagingPool) get(n int64) (*cuda.HostMem, error) {
	if sp.expect[n] > 0 {
		sp.expect[n]--
	}
	if l := sp.free[n]; len(l) > 0 {
		h := l[len(l)-1]
		sp.free[n] = l[:len(l)-1]
		sp.idle -= n
		sp.trim(n)
		return h, nil
	}
	return cuda.HostAllocMapped(n)
}

// put takes a buffer back.
func (sp *stagingPool) put(h *cuda.HostMem) {
	n := int64(len(h.Bytes))
	sp.free[n] = append(sp.free[n], h)
	sp.idle += n
	sp.trim(n)
}

// trim frees buffers of n bytes that no planned case will want, and any
// beyond the idle cap.
func (sp *stagingPool) trim(n int64) {
	l := sp.free[n]
	for len(l) > 0 && (len(l) > sp.expect[n] || sp.idle > sp.cap) {
		l[len(l)-1].Free()
		l = l[:len(l)-1]
		sp.idle -= n
	}
	sp.free[n] = l
	if sp.expect[n] == 0 {
		delete(sp.expect, n)
	}
	if len(l) == 0 {
		delete(sp.free, n)
	}
}

// diffSrc holds the oracle's two device helpers. msccl_test_diff counts
// the bytes where a and b differ and the first such index; each thread
// keeps its own count and first index and adds them once, so equal
// buffers (the usual case) cost no atomics at all. msccl_test_gather
// builds an input from its pieces (cpu.InputPieces): piece p of out is
// the table's bytes from at[p] on, piece bytes long (shorter at the end).
const diffSrc = `
extern "C" __global__ void msccl_test_diff(const unsigned char *a, const unsigned char *b,
		unsigned long long n, unsigned long long *res) {
	unsigned long long count = 0, first = ~0ULL;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		if (a[i] != b[i]) {
			count++;
			if (i < first) first = i;
		}
	}
	if (count != 0) {
		atomicAdd(&res[0], count);
		atomicMin(&res[1], first);
	}
}

extern "C" __global__ void msccl_test_gather(const unsigned char *tab, const long long *at,
		unsigned char *out, unsigned long long n, unsigned long long piece) {
	for (unsigned long long p = blockIdx.x; p * piece < n; p += gridDim.x) {
		unsigned long long base = p * piece;
		unsigned long long len = n - base < piece ? n - base : piece;
		const unsigned char *src = tab + at[p];
		for (unsigned long long i = threadIdx.x; i < len; i += blockDim.x) {
			out[base + i] = src[i];
		}
	}
}
`

// diffKernel compares device buffers rank by rank on a stream: results
// live in device memory (no host atomics over PCIe), are reset from and
// copied back to pinned host memory in stream order.
type diffKernel struct {
	mod    *cuda.Module
	fn     *cuda.Function
	gather *cuda.Function
	ranks  int
	dev    cuda.DevicePtr // [ranks]{count, first}
	host   *cuda.HostMem  // [ranks]{0, ^0} reset pattern, then [ranks]{count, first} results
}

const diffSlot = 16 // bytes of results per rank

// newDiffKernel compiles and loads the kernel for ranks ranks and checks
// it on buffers with known differences, so that a kernel that cannot see
// a difference fails here instead of passing every graph replay; gpuMu is
// held.
func newDiffKernel(e *Executor, ranks int) (*diffKernel, error) {
	img, err := e.image("msccl_test_diff", diffSrc)
	if err != nil {
		return nil, err
	}
	d := &diffKernel{ranks: ranks}
	if d.mod, err = cuda.LoadModule(img); err != nil {
		return nil, err
	}
	if d.fn, err = d.mod.Function("msccl_test_diff"); err == nil {
		d.gather, err = d.mod.Function("msccl_test_gather")
	}
	if err == nil {
		if d.dev, err = cuda.Malloc(int64(diffSlot * ranks)); err == nil {
			d.host, err = cuda.HostAllocMapped(int64(2 * diffSlot * ranks))
		}
	}
	if err == nil {
		for r := 0; r < ranks; r++ {
			binary.LittleEndian.PutUint64(d.host.Bytes[r*diffSlot+8:], ^uint64(0))
		}
		err = d.selfCheck()
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("device compare kernel: %w", err)
	}
	return d, nil
}

// selfCheck compares a buffer with a copy that differs in known bytes
// (one of them past the last multiple of 16) and with itself.
func (d *diffKernel) selfCheck() error {
	const n = 1<<16 + 3
	s, err := cuda.NewStream(true)
	if err != nil {
		return err
	}
	defer s.Destroy()
	h, err := cuda.HostAllocMapped(2 * n)
	if err != nil {
		return err
	}
	defer h.Free()
	a, err := cuda.Malloc(2 * n)
	if err != nil {
		return err
	}
	defer cuda.Free(a)
	for i := 0; i < n; i++ {
		h.Bytes[i] = byte(i*7 + i>>8)
	}
	copy(h.Bytes[n:], h.Bytes[:n])
	wrong := []int{5, 4096, 4097, 60000, n - 1}
	for _, i := range wrong {
		h.Bytes[n+i] ^= 0x40
	}
	b := a + n
	if err := cuda.MemcpyAsync(a, h.Dev, 2*n, s); err != nil {
		return err
	}
	ptrs := make([][2]cuda.DevicePtr, d.ranks)
	for r := range ptrs {
		ptrs[r] = [2]cuda.DevicePtr{a, b} // rank 0 differs, the others compare a with itself
		if r > 0 {
			ptrs[r][1] = a
		}
	}
	if err := d.enqueue(s, ptrs, n); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	for r := range ptrs {
		count, first := d.result(r)
		want, wantFirst := uint64(0), ^uint64(0)
		if r == 0 {
			want, wantFirst = uint64(len(wrong)), uint64(wrong[0])
		}
		if count != want || first != wantFirst {
			return fmt.Errorf("self-check rank %d: counted %d differing bytes (first %d), want %d (first %d)", r, count, first, want, wantFirst)
		}
	}
	return nil
}

// enqueue resets the results and compares ptrs[r][0] with ptrs[r][1]
// over n bytes for every rank, then copies the results to the host, all
// on s; read them with result after s is synchronised.
func (d *diffKernel) enqueue(s *cuda.Stream, ptrs [][2]cuda.DevicePtr, n int64) error {
	slots := int64(diffSlot * d.ranks)
	if err := cuda.MemcpyAsync(d.dev, d.host.Dev, slots, s); err != nil {
		return err
	}
	blocks := uint32(min(max((n+255)/256, 1), 4096))
	for r, p := range ptrs {
		a, b, nn, res := uint64(p[0]), uint64(p[1]), uint64(n), uint64(d.dev)+uint64(diffSlot*r)
		if err := d.fn.Launch([3]uint32{blocks, 1, 1}, [3]uint32{256, 1, 1}, 0, s,
			unsafe.Pointer(&a), unsafe.Pointer(&b), unsafe.Pointer(&nn), unsafe.Pointer(&res)); err != nil {
			return err
		}
	}
	return cuda.MemcpyAsync(d.host.Dev+cuda.DevicePtr(slots), d.dev, slots, s)
}

// result is rank r's count of differing bytes and the first one's index
// (^0 when none differ).
func (d *diffKernel) result(r int) (count, first uint64) {
	at := d.ranks*diffSlot + r*diffSlot
	return binary.LittleEndian.Uint64(d.host.Bytes[at:]), binary.LittleEndian.Uint64(d.host.Bytes[at+8:])
}

// build enqueues the gather of one input of n bytes into out from a
// table and piece offsets already on the device.
func (d *diffKernel) build(s *cuda.Stream, out, table, at cuda.DevicePtr, n int64) error {
	pieces := (n + cpu.InputPiece - 1) / cpu.InputPiece
	if pieces == 0 {
		return nil
	}
	o, t, a, nn, pc := uint64(out), uint64(table), uint64(at), uint64(n), uint64(cpu.InputPiece)
	return d.gather.Launch([3]uint32{uint32(min(pieces, 65535)), 1, 1}, [3]uint32{256, 1, 1}, 0, s,
		unsafe.Pointer(&t), unsafe.Pointer(&a), unsafe.Pointer(&o), unsafe.Pointer(&nn), unsafe.Pointer(&pc))
}

func (d *diffKernel) close() {
	if d.host != nil {
		d.host.Free()
	}
	if d.dev != 0 {
		cuda.Free(d.dev)
	}
	if d.mod != nil {
		d.mod.Unload()
	}
}

// oracleSeed is the seed of every case's CPU run, and so of the inputs
// built on the device.
const oracleSeed = 0

// hostInputs (MSCCL_GPU_HOST_INPUTS=1) copies every launch's inputs from
// the host instead of building them on the device.
var hostInputs = os.Getenv("MSCCL_GPU_HOST_INPUTS") != ""

// stagePieces writes the piece offsets of rank r's input on launch l into
// the staging buffer; outside gpuMu.
func (cr *caseRun) stagePieces(l, r int) {
	tab, at := cpu.InputPieces(cr.c.dt, oracleSeed, l, r, cr.inN, cr.at)
	cr.at, cr.tabHost[r] = at, tab
	off := cr.offOff(r)
	for i, a := range at {
		binary.LittleEndian.PutUint64(cr.pin.Bytes[off+8*int64(i):], uint64(a))
	}
}

func (cr *caseRun) offOff(r int) int64 {
	return int64(cr.n)*(cr.inN+cr.outN) + int64(r)*cr.pieces*8
}

// inputsToDevice puts launch l's inputs in the buffers of run hk. Built
// on the device, only the piece offsets cross the bus (the tables once
// per configuration); on launch 0 the CPU's inputs cross too, into the
// other run's buffers, and must equal the built ones byte for byte, so a
// recipe the device gets wrong fails the case at once rather than as
// output mismatches. gpuMu is held.
func (cr *caseRun) inputsToDevice(l, hk int) error {
	if !cr.devIn {
		for r := 0; r < cr.n; r++ {
			if err := cuda.MemcpyAsync(cr.bufs[hk].In[r], cr.pin.Dev+cuda.DevicePtr(int64(r)*cr.inN), cr.inN, cr.s); err != nil {
				return err
			}
		}
		return nil
	}
	if cr.pieces == 0 {
		return nil
	}
	if err := cuda.MemcpyAsync(cr.offDev, cr.pin.Dev+cuda.DevicePtr(cr.offOff(0)), int64(cr.n)*cr.pieces*8, cr.s); err != nil {
		return err
	}
	for r := 0; r < cr.n; r++ {
		tab, err := cr.side.table(cr.tabHost[r])
		if err != nil {
			return err
		}
		if err := cr.diff.build(cr.s, cr.bufs[hk].In[r], tab, cr.offDev+cuda.DevicePtr(int64(r)*cr.pieces*8), cr.inN); err != nil {
			return err
		}
	}
	if l > 0 {
		return nil
	}
	o := 1 - hk
	ptrs := make([][2]cuda.DevicePtr, cr.n)
	for r := range ptrs {
		if err := cuda.MemcpyAsync(cr.bufs[o].In[r], cr.pin.Dev+cuda.DevicePtr(int64(r)*cr.inN), cr.inN, cr.s); err != nil {
			return err
		}
		ptrs[r] = [2]cuda.DevicePtr{cr.bufs[hk].In[r], cr.bufs[o].In[r]}
	}
	if err := cr.diff.enqueue(cr.s, ptrs, cr.inN); err != nil {
		return err
	}
	if err := cr.s.Synchronize(); err != nil {
		return err
	}
	for r := 0; r < cr.n; r++ {
		if count, first := cr.diff.result(r); count != 0 {
			return fmt.Errorf("rank %d: the input built on the device from cpu.InputPieces differs from the CPU executor's in %d of %d bytes (first at byte %d); MSCCL_GPU_HOST_INPUTS=1 copies inputs from the host instead", r, count, cr.inN, first)
		}
	}
	return nil
}

// table returns the device copy of an input table, uploading it on first
// use; gpuMu is held.
func (g *gpuSide) table(tab []byte) (cuda.DevicePtr, error) {
	if d, ok := g.tables[&tab[0]]; ok {
		return d, nil
	}
	d, err := cuda.Malloc(int64(len(tab)))
	if err != nil {
		return 0, err
	}
	if err := cuda.MemcpyHtoD(d, tab); err != nil {
		cuda.Free(d)
		return 0, err
	}
	g.tables[&tab[0]] = d
	return d, nil
}

// copyLocked (MSCCL_GPU_COPY_LOCKED=1) copies the eager outputs to the host
// on the executor's stream under gpuMu, as before the copy stream.
var copyLocked = os.Getenv("MSCCL_GPU_COPY_LOCKED") != ""

// copyOut brings the eager outputs (the run compared on the host) back on
// the case's own copy stream once onGPU has let gpuMu go: the kernels
// that wrote them have completed (onGPU waited for them), only this
// case's goroutine touches its buffers, and a copy holds no SMs, so it
// overlaps the next case's kernels instead of adding to the serial GPU
// time.
func (cr *caseRun) copyOut() error {
	hk := hostRun()
	for r := 0; r < cr.n; r++ {
		if err := cuda.MemcpyAsync(cr.pin.Dev+cuda.DevicePtr(cr.outOff(r)), cr.bufs[hk].Out[r], cr.outN, cr.cs); err != nil {
			return err
		}
	}
	return cr.cs.Synchronize()
}
