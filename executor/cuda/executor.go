package cudaexec

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/diag"
	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
)

// Every rank has its own stream; the driver deals a context's streams
// onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default, in
// order each). Ranks' kernels run concurrently even on one queue, so any
// value works (the port proxy's copies have a context of their own,
// proxy.go), but more queues keep one rank's launch from waiting behind
// another's: 32, the driver's maximum, unless the user chose (Megatron-LM
// sets 1, and that is kept). The driver reads it when the context is
// created, hence package init.
//
// Not under MPS: there every client's queues come out of one pool that
// the server shares among its clients, and a client owns the ones it
// asked for, so 32 each left no room for a fourth process on the H200
// ("cuDevicePrimaryCtxRetain: out of memory" for one of four ranks,
// docs/evidence). MPS clients keep the driver's default, and port
// channels copy by SMs there (resolvePortCopy).
func init() {
	if os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS") == "" && !mpsClient() {
		os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
	}
}

// mpsClient reports whether this process will connect to an MPS server:
// the driver does when it finds the control daemon's pipe, in
// CUDA_MPS_PIPE_DIRECTORY or the default /tmp/nvidia-mps. It must be
// known before the first context, so it cannot ask the driver.
func mpsClient() bool {
	dir := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	if dir == "" {
		dir = "/tmp/nvidia-mps"
	}
	_, err := os.Stat(filepath.Join(dir, "control"))
	return err == nil
}

// Options configure an Executor.
type Options struct {
	// Timeout is how long one wait may spin before the watchdog ends the
	// kernel and reports the block; 0 means 5 s.
	Timeout time.Duration
	// AllowMulticast lets plans with switch channels load. Switch ops are
	// still refused: this executor never creates multicast objects.
	AllowMulticast bool
	// CacheDir holds compiled kernels; "" means nvrtc.DefaultCacheDir.
	CacheDir string
	// FifoEntries is the port-channel request queue length per rank (a
	// power of two); 0 means 1024.
	FifoEntries int
	// Trace, when positive, runs the traced kernel instance, which records
	// up to Trace ops per block per launch (start and end from
	// %globaltimer) for Timeline; 0 runs the instance without that code.
	Trace int
	// PortCopy chooses who moves port channels' bytes (portcopy.go).
	PortCopy PortCopy
	// ProxyHandler, with PortCopyProxy, serves the port channels'
	// requests from Go instead of the built-in C loop (proxyhandler.go):
	// a user's handler of msccl.ProxyHandler, the default handling its
	// Trigger.Default.
	ProxyHandler proxyapi.Handler
	// Devices places rank r on device Devices[r] (one entry per rank,
	// CheckDevices; ParseDevices reads msccl-bench's --devices). Nil puts
	// every rank on device 0 in the fallback context, as always; set, even
	// to all zeros, every rank's driver calls run in its device's context
	// (devices.go), and pairs of devices that a channel crosses get peer
	// access or the plan is refused. Open makes Devices[0]'s context the
	// fallback: a Call.Stream must be a stream of that context, as it is of
	// device 0's on the default path.
	Devices []int
	// StageInKernel (OpenRank only) runs the kernel's _stage instance,
	// which makes a collective's staging copies itself
	// (RankExecutor.EnqueueStaged, kstage.go).
	StageInKernel bool
}

// Executor runs one plan; it owns the per-rank streams, channels,
// semaphores and the kernel modules. Methods are not safe for concurrent
// use.
type Executor struct {
	p      *ir.Plan
	rule   ir.SizeRule // the sizes the plan serves; every buffer set is checked against it
	sms    int         // multiprocessors of dev, for the co-residency check
	opt    Options
	dev    cuda.Device   // the device of ctx: 0, Devices[0], or OpenRank's
	ctx    *cuda.Context // dev's primary context, the fallback context
	devs   *devices      // Options.Devices: each rank's device and context (devices.go)
	arch   string
	ranks  []*rankRes
	fns    map[fnKey]*fnEntry
	binds  map[bindKey]*binding
	last   *binding // the binding of the latest call: bind's fast path
	order  []bindKey
	fork   *cuda.Event
	proxy  *proxy
	broken error
	tl     *timeline // Options.Trace: the ranks' timeline buffers (trace.go)

	// Run on a caller's stream as a graph launch (runstream.go): the
	// capture stream, the event after the last launch and the stream it
	// was on, and whether the rank streams got work since.
	capStream *cuda.Stream
	graphDone *cuda.Event
	graphTail *cuda.Stream
	rankTail  bool
}

type fnKey struct {
	dt ir.DType
	ll int
}

type fnEntry struct {
	mod  *cuda.Module
	fn   *cuda.Function
	smem int // dynamic shared memory the function was configured for
}

// rankRes is what one rank owns for the executor's whole life.
type rankRes struct {
	ctx      *cuda.Context // the rank's device context with Options.Devices, else nil (the fallback)
	stream   *cuda.Stream
	done     *cuda.Event
	static   cuda.DevicePtr // chans, sems, barriers, epoch, done counter, fifo head
	memChans cuda.DevicePtr
	portChan cuda.DevicePtr
	sems     cuda.DevicePtr
	barriers cuda.DevicePtr
	epoch    cuda.DevicePtr
	doneCnt  cuda.DevicePtr
	fifoHead cuda.DevicePtr
	grid     cuda.DevicePtr    // the staging grid barrier (a kernels.BlockBarrier)
	inbound  [2]cuda.DevicePtr // [memory, port] inbound semaphores, one u64 per channel
	portIn   *cuda.HostMem     // the port inbound semaphores: mapped host memory the proxy stores to
	expected [2]cuda.DevicePtr // signals consumed so far, one u64 per channel
	nchan    [2]int
	peers    [2][]int
	watch    *cuda.HostMem // one WatchRecord per block
	fifo     *cuda.HostMem // entries, then tail, then flushed
	nblocks  int
}

// openStreams makes what a rank launches with, the same for the
// in-process executor and a RankExecutor: its stream, the event that
// says its last launch finished, and one watchdog record per block in
// mapped host memory (zeroed: a record the kernel has not written reads
// as no progress yet).
func (rs *rankRes) openStreams() error {
	var err error
	if rs.stream, err = cuda.NewStream(true); err != nil {
		return err
	}
	if rs.done, err = cuda.NewEvent(false); err != nil {
		return err
	}
	rs.watch, err = cuda.HostAllocMapped(int64(kernels.WatchBytes * rs.nblocks))
	return err
}

// Open compiles nothing yet: it checks the plan, makes the device current
// and builds every rank's channels and semaphores.
func Open(p *ir.Plan, opt Options) (*Executor, error) {
	if p == nil {
		return nil, errors.New("cudaexec: nil plan")
	}
	if err := checkPlan(p, opt.AllowMulticast); err != nil {
		return nil, err
	}
	if opt.StageInKernel {
		// Its callers stage on their own streams (stage.go), not through
		// the kernel's parameter.
		return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: StageInKernel is an option of OpenRank (one process per rank); Open stages with its own copies")
	}
	rule, err := openRule(p, &opt)
	if err != nil {
		return nil, err
	}
	if opt.FifoEntries <= 0 {
		opt.FifoEntries = 1024
	}
	if opt.FifoEntries&(opt.FifoEntries-1) != 0 {
		return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: FifoEntries %d is not a power of two", opt.FifoEntries)
	}
	if opt.PortCopy, err = resolvePortCopy(opt.PortCopy); err != nil {
		return nil, err
	}
	if opt.Devices != nil {
		// The list's own mistakes before the driver: they need no GPU to see.
		if err := CheckDevices(opt.Devices, len(p.GPUs), math.MaxInt); err != nil {
			return nil, err
		}
	}
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	dev := cuda.Device(0)
	if opt.Devices != nil {
		visible, err := cuda.DeviceCount()
		if err != nil {
			return nil, err
		}
		if err := CheckDevices(opt.Devices, len(p.GPUs), visible); err != nil {
			return nil, err
		}
		opt.Devices = append([]int(nil), opt.Devices...)
		dev = cuda.Device(opt.Devices[0])
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	if err := ctx.SetCurrent(); err != nil {
		return nil, err
	}
	arch, sms, err := deviceArch(dev)
	if err != nil {
		return nil, err
	}
	e := &Executor{p: p, rule: rule, sms: sms, opt: opt, dev: dev, ctx: ctx, arch: arch,
		fns: map[fnKey]*fnEntry{}, binds: map[bindKey]*binding{}}
	if opt.Devices != nil {
		if err := e.place(opt.Devices); err != nil {
			return nil, err
		}
	}
	if e.fork, err = cuda.NewEvent(false); err != nil {
		return nil, err
	}
	if err := e.setupRanks(); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.setupTrace(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Plan returns the plan the executor runs.
func (e *Executor) Plan() *ir.Plan { return e.p }

// Ranks is the number of ranks.
func (e *Executor) Ranks() int { return len(e.p.GPUs) }

func (e *Executor) setupRanks() error {
	n := len(e.p.GPUs)
	e.ranks = make([]*rankRes, n)
	for r := range e.p.GPUs {
		g := &e.p.GPUs[r]
		rs := &rankRes{nblocks: len(g.ThreadBlocks)}
		e.ranks[r] = rs
		for _, c := range g.Channels {
			if c.Type == ir.ChanMemory || c.Type == ir.ChanPort {
				s := ir.ChanSlot(c.Type)
				rs.peers[s] = append(rs.peers[s], c.ConnectedTo...)
			}
		}
		rs.nchan = [2]int{len(rs.peers[0]), len(rs.peers[1])}
		if rs.nblocks == 0 {
			return fmt.Errorf("gpus[%d] has no thread blocks", r)
		}
		if e.devs != nil {
			rs.ctx = e.devs.ctx[e.devs.of[r]]
		}
		if err := rs.do(func() error { return e.setupRank(r, rs, g) }); err != nil {
			return err
		}
	}
	// Pair the k-th channel A→B with the k-th channel B→A of the same type.
	remote := make([][2][]cuda.DevicePtr, n)
	remotePort := make([][]*uint64, n) // the same port semaphores, as the proxy stores to them
	for r, rs := range e.ranks {
		for s := 0; s < 2; s++ {
			remote[r][s] = make([]cuda.DevicePtr, rs.nchan[s])
			seen := map[int]int{}
			for i, peer := range rs.peers[s] {
				k := seen[peer]
				seen[peer]++
				if peer < 0 || peer >= n || peer == r {
					return fmt.Errorf("gpus[%d].channels: channel %d connects to rank %d", r, i, peer)
				}
				j, cnt := -1, 0
				for jj, q := range e.ranks[peer].peers[s] {
					if q == r {
						if cnt == k {
							j = jj
							break
						}
						cnt++
					}
				}
				if j < 0 {
					return fmt.Errorf("gpus[%d]: %s channel %d to rank %d has no partner channel on rank %d", r, []string{"memory", "port"}[s], i, peer, peer)
				}
				remote[r][s][i] = e.ranks[peer].inbound[s] + cuda.DevicePtr(8*j)
				if s == 1 && e.ranks[peer].portIn != nil {
					remotePort[r] = append(remotePort[r], e.ranks[peer].portIn.Word(int64(8*j)))
				}
			}
		}
	}
	for r, rs := range e.ranks {
		for s := 0; s < 2; s++ {
			if rs.nchan[s] == 0 {
				continue
			}
			exp := rs.expected[s]
			cs := make([]kernels.Chan, rs.nchan[s])
			for i := range cs {
				cs[i] = kernels.Chan{Inbound: uint64(rs.inbound[s]) + uint64(8*i), RemoteInbound: uint64(remote[r][s][i]),
					Expected: uint64(exp) + uint64(8*i), Peer: int32(rs.peers[s][i]), Index: uint32(i)}
				if s == 1 && e.opt.PortCopy == PortCopyProxy {
					// No peer word in the kernel's hands: every port
					// channel goes through the FIFO (the kernel's port_fifo).
					cs[i].RemoteInbound = 0
				}
			}
			dst := rs.memChans
			if s == 1 {
				dst = rs.portChan
			}
			if err := rs.do(func() error { return cuda.MemcpyHtoD(dst, kernels.EncodeChans(cs)) }); err != nil {
				return err
			}
		}
	}
	if hasPort(e.p) && e.opt.PortCopy == PortCopyProxy {
		pr, err := startProxy(e, remotePort)
		if err != nil {
			return err
		}
		e.proxy = pr
	}
	return nil
}

// setupRank makes rank r's streams, static device memory, semaphores and
// FIFO (setupRanks, in the rank's context).
func (e *Executor) setupRank(r int, rs *rankRes, g *ir.GPU) error {
	var err error
	if err = rs.openStreams(); err != nil {
		return err
	}
	// Port inbound words are device memory when the peers' kernels
	// signal them (SM copies).
	sm := e.opt.PortCopy == PortCopySM
	if err := carveStatic(rs, g, [2]bool{true, sm}); err != nil {
		return err
	}
	if !sm && rs.nchan[1] > 0 {
		// The proxy delivers port signals from the host (see
		// runtime/cuda/proxy.c for why not a stream-ordered write),
		// so their semaphores live in mapped host memory.
		if rs.portIn, err = cuda.HostAllocMapped(8 * int64(rs.nchan[1])); err != nil {
			return err
		}
		rs.inbound[1] = rs.portIn.Dev
	}
	if err := uploadSems(g, r, rs.sems); err != nil {
		return err
	}
	if rs.nchan[1] > 0 && !sm {
		if rs.fifo, err = cuda.HostAllocMapped(int64(32*e.opt.FifoEntries + 64)); err != nil {
			return err
		}
		clear(rs.fifo.Bytes)
	}
	return nil
}

// function returns the kernel for a data type and packet width, compiling
// it with NVRTC (cached on disk) on first use.
func (e *Executor) function(dt ir.DType, ll int) (*fnEntry, error) {
	if f := e.fns[fnKey{dt, ll}]; f != nil {
		return f, nil
	}
	name, img, err := e.kernelImage(dt, ll)
	if err != nil {
		return nil, err
	}
	return e.loadKernel(dt, ll, name, img)
}

// kernelImage compiles the kernel for (dt, ll) with NVRTC (cached on
// disk) without loading it: host work only, no driver call, so that
// OpenRank's ranks can do it before the step in which they load
// (rankload.go).
func (e *Executor) kernelImage(dt ir.DType, ll int) (name string, img []byte, err error) {
	src, err := kernels.SourceFor(dt, ll)
	name, _ = kernels.KernelName(dt, ll)
	switch {
	case e.opt.Trace > 0:
		src, err = kernels.TraceSourceFor(dt, ll)
		name += "_trace"
	case e.opt.StageInKernel:
		src, err = kernels.StageSourceFor(dt, ll)
		name += "_stage"
	}
	if err != nil {
		return "", nil, err
	}
	img, err = e.image(name, src)
	return name, img, err
}

// loadKernel loads a compiled image as the kernel of (dt, ll).
func (e *Executor) loadKernel(dt ir.DType, ll int, name string, img []byte) (*fnEntry, error) {
	f, err := loadEntry(name, img)
	if err != nil {
		return nil, err
	}
	e.fns[fnKey{dt, ll}] = f
	return f, nil
}

// compile builds entry point name of src for the device (NVRTC, cached on
// disk) and loads it.
func (e *Executor) compile(name, src string) (*fnEntry, error) {
	img, err := e.image(name, src)
	if err != nil {
		return nil, err
	}
	return loadEntry(name, img)
}

// image compiles src for the device (NVRTC, cached on disk).
func (e *Executor) image(name, src string) ([]byte, error) {
	var err error
	dir := e.opt.CacheDir
	if dir == "" {
		if dir, err = nvrtc.DefaultCacheDir(); err != nil {
			dir = filepath.Join(os.TempDir(), "msccl-kernels")
		}
	}
	img, err := nvrtc.CompileCached(dir, src, name+".cu", kernels.CompileOptions(e.arch))
	if err != nil {
		return nil, fmt.Errorf("compiling %s for %s: %w", name, e.arch, err)
	}
	return img, nil
}

// loadEntry loads img and finds its entry point name.
func loadEntry(name string, img []byte) (*fnEntry, error) {
	mod, err := cuda.LoadModule(img)
	if err != nil {
		return nil, err
	}
	fn, err := mod.Function(name)
	if err != nil {
		mod.Unload()
		return nil, err
	}
	return &fnEntry{mod: mod, fn: fn, smem: 48 << 10}, nil
}

// Close releases everything the executor allocated. It waits for work in
// flight first.
func (e *Executor) Close() error {
	if e == nil {
		return nil
	}
	var first firstErr
	keep := first.keep
	keep(e.syncRanks())
	if e.proxy != nil {
		keep(e.proxy.stop())
		e.proxy = nil
	}
	for _, b := range e.binds {
		keep(b.free())
	}
	e.binds, e.last = map[bindKey]*binding{}, nil
	for _, f := range e.fns {
		keep(f.mod.Unload())
	}
	e.fns = map[fnKey]*fnEntry{}
	e.devs.unload(keep)
	for _, rs := range e.ranks {
		if rs != nil {
			keep(rs.do(func() error { rs.free(keep); return nil }))
		}
	}
	keep(e.tl.free())
	e.tl = nil
	e.ranks = nil
	if e.fork != nil {
		keep(e.fork.Destroy())
		e.fork = nil
	}
	e.closeStreamGraphs(keep)
	return first.err
}

// u64At views 8 bytes of mapped host memory for atomic access.
func u64At(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }
