package cudaexec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/executor/wiring"
	"github.com/msccl-go/msccl-go/internal/closeonce"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/cudadev"
)

// RankExecutor runs one rank of a plan in a job of one process per rank:
// this process's rank's kernel (the same kernel and op tables as
// Executor's) over the node's other ranks' buffers and semaphore words,
// which the communicator mapped here through CUDA IPC (runtime/cudadev).
// Memory channels are loads and stores to the peers' mapped pointers;
// port channels are copied by this kernel's own threads (PortCopySM):
// their semaphore words are device memory in the peers' sync regions,
// which another process's host proxy could not reach in order
// (docs/rationale.md). Methods are not safe for concurrent use.
type RankExecutor struct {
	k     *Executor // the plan, options, kernel cache and device; no ranks
	c     *comm.Comm
	dev   *cudadev.Device
	rank  int
	conns *comm.Connections
	rs    *rankRes
	sets  map[*RankBuffers]struct{}
	// recorded: rs.done follows the last launch Enqueue made on a
	// caller's stream outside a capture (drain waits for it there).
	recorded bool
	pulse    *pulser
	// rounds orders the launches of the job's ranks in this process
	// (rankrounds.go); nil when this rank is alone in it.
	rounds *launchRounds
	// The socket transport to ranks on other nodes (netproxy.go,
	// netrecv.go): nil when the plan has no port channel leaving the node.
	space   uint32
	np      *netProxy
	nr      *netRecv
	nextSet uint16 // buffer sets numbered in Alloc order, alike on every rank
	mu      sync.Mutex
	// broken: after a hang or a failed launch the channel counters are
	// out of step with the peers', so no later Run can be right.
	broken error
	closed bool
	// stage is the kernel's staging parameter of the next launch
	// (Options.StageInKernel; counts zero outside EnqueueStaged);
	// stageIn is InputInKernel of the plan and rank, stageInWhy why not.
	stage      kernels.Stage
	stageIn    bool
	stageInWhy string
}

// openRule is what Open and OpenRank both do to a checked plan: derive its
// size rule and default the watchdog timeout (5 s) in opt.
func openRule(p *ir.Plan, opt *Options) (ir.SizeRule, error) {
	rule, err := p.SizeRule()
	if err != nil {
		return rule, fmt.Errorf("cudaexec: %w", err)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 5 * time.Second
	}
	return rule, nil
}

// OpenRank prepares p on this rank of c, whose device must be the CUDA
// device: every rank calls it with the same plan (collective). Options
// are Executor's; PortCopy must be Auto or SM, Trace 0.
func OpenRank(ctx context.Context, c *comm.Comm, p *ir.Plan, opt Options) (*RankExecutor, error) {
	if p == nil {
		return nil, errors.New("cudaexec: nil plan")
	}
	dev, ok := c.Device().(*cudadev.Device)
	if !ok {
		return nil, fmt.Errorf("cudaexec: the communicator's device is %q; OpenRank needs the cuda device", c.Device().Name())
	}
	if err := rankPlanCheck(p, c, opt); err != nil {
		return nil, err
	}
	rule, err := openRule(p, &opt)
	if err != nil {
		return nil, err
	}
	opt.PortCopy = PortCopySM
	if opt.FifoEntries <= 0 {
		opt.FifoEntries = 1024
	}
	if opt.FifoEntries&(opt.FifoEntries-1) != 0 {
		return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: FifoEntries %d is not a power of two", opt.FifoEntries)
	}
	arch, sms, err := deviceArch(dev.Context().Device())
	if err != nil {
		return nil, err
	}
	// Connect is collective: every rank reaches it, or every rank
	// refused the plan above.
	w, err := wiring.Of(p)
	if err != nil {
		return nil, fmt.Errorf("cudaexec: %w", err)
	}
	conns, err := c.Connect(ctx, w)
	if err != nil {
		return nil, err
	}
	e := &RankExecutor{c: c, dev: dev, rank: c.Rank(), conns: conns, sets: map[*RankBuffers]struct{}{}, space: c.NewSpace(),
		k: &Executor{p: p, rule: rule, sms: sms, opt: opt, dev: dev.Context().Device(), ctx: dev.Context(), arch: arch,
			fns: map[fnKey]*fnEntry{}, binds: map[bindKey]*binding{}},
		rounds: joinRounds(conns, c.Rank())}
	if err := e.setup(); err != nil {
		e.Close()
		return nil, fmt.Errorf("cudaexec: rank %d: %w", e.rank, err)
	}
	e.stage.Grid = uint64(e.rs.grid)
	e.stageIn, e.stageInWhy = InputInKernel(p, e.rank)
	return e, nil
}

// rankPlanCheck refuses, on every rank alike (each decides from the plan
// and the ranks' nodes), what one process per rank cannot run yet.
func rankPlanCheck(p *ir.Plan, c *comm.Comm, opt Options) error {
	if err := checkPlan(p, false); err != nil {
		return fmt.Errorf("cudaexec: %w", err)
	}
	if len(p.GPUs) != c.Size() {
		return diag.Errorc(diag.CodeRanks, "cudaexec: plan %q has %d ranks, the job has %d", p.Name, len(p.GPUs), c.Size())
	}
	if opt.Trace > 0 {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: Trace needs every rank in one process (Open), not OpenRank")
	}
	if opt.PortCopy == PortCopyProxy {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: PortCopyProxy needs every rank in one process (Open); one process per rank copies port channels with SMs")
	}
	for r := range p.GPUs {
		g := &p.GPUs[r]
		// Port channels cross nodes through the socket transport
		// (netproxy.go); memory channels, and buffers reached through
		// them, stay within a node.
		for _, fc := range g.FlatChannels(ir.ChanMemory) {
			if fc.Peer >= 0 && fc.Peer < c.Size() && c.Node(fc.Peer) != c.Node(r) {
				return diag.Errorc(diag.CodeUnsupported, "cudaexec: gpus[%d]: a memory channel to rank %d on node %q (rank %d: %q); memory channels connect ranks of one node only (use a port channel across nodes)", r, fc.Peer, c.Node(fc.Peer), r, c.Node(r))
			}
		}
		for i, rb := range g.RemoteBuffers {
			if rb.Rank < 0 || rb.Rank >= c.Size() || c.Node(rb.Rank) == c.Node(r) {
				continue
			}
			for _, t := range rb.AccessChannelTypes {
				if t != ir.ChanPort {
					return diag.Errorc(diag.CodeUnsupported, "cudaexec: gpus[%d].remote_buffers[%d]: rank %d is on node %q, rank %d on %q, and the buffer is reached over %s channels; only port channels cross nodes", r, i, rb.Rank, c.Node(rb.Rank), r, c.Node(r), t)
				}
			}
		}
	}
	return nil
}

// devPtr is the address of a semaphore word of the cuda device.
func devPtr(l comm.Loc) (cuda.DevicePtr, error) {
	m, ok := l.Mem.(*cudadev.Memory)
	if !ok {
		return 0, fmt.Errorf("semaphore memory of type %T is not cuda memory", l.Mem)
	}
	if l.Off < 0 || l.Off%8 != 0 || l.Off+8 > m.Size() {
		return 0, fmt.Errorf("semaphore word at byte %d of a %d-byte region", l.Off, m.Size())
	}
	return m.Ptr() + cuda.DevicePtr(l.Off), nil
}

// setup makes the rank's stream, watchdog records and device state:
// expected counters, channel ends (inbound words in this rank's sync
// region, remote ones in the peers' as mapped here), semaphores,
// barriers, the epoch and done counters.
func (e *RankExecutor) setup() error {
	g := &e.k.p.GPUs[e.rank]
	rs := &rankRes{nblocks: len(g.ThreadBlocks)}
	e.rs = rs
	if rs.nblocks == 0 {
		return fmt.Errorf("gpus[%d] has no thread blocks", e.rank)
	}
	ends := [2][]comm.Channel{e.conns.Memory, e.conns.Port}
	for s := range ends {
		rs.nchan[s] = len(ends[s])
		for _, ch := range ends[s] {
			rs.peers[s] = append(rs.peers[s], ch.Peer)
		}
	}
	var err error
	if err = rs.openStreams(); err != nil {
		return err
	}
	// The inbound words are in the communicator's sync regions.
	if err := carveStatic(rs, g, [2]bool{}); err != nil {
		return err
	}
	if err := uploadSems(g, e.rank, rs.sems); err != nil {
		return err
	}
	if e.pulse, err = startPulse(e.conns, e.rank); err != nil {
		return err
	}
	for s := range ends {
		if rs.nchan[s] == 0 {
			continue
		}
		cs := make([]kernels.Chan, rs.nchan[s])
		for i, ch := range ends[s] {
			in, err := devPtr(ch.Inbound)
			if err != nil {
				return fmt.Errorf("%s channel %d: %w", ch.Type, i, err)
			}
			var remote cuda.DevicePtr
			if ch.Remote.Mem != nil {
				if remote, err = devPtr(ch.Remote); err != nil {
					return fmt.Errorf("%s channel %d to rank %d: %w", ch.Type, i, ch.Peer, err)
				}
			}
			cs[i] = kernels.Chan{Inbound: uint64(in), RemoteInbound: uint64(remote),
				Expected: uint64(rs.expected[s]) + uint64(8*i), Peer: int32(ch.Peer), Index: uint32(i)}
		}
		dst := rs.memChans
		if s == 1 {
			dst = rs.portChan
		}
		if err := cuda.MemcpyHtoD(dst, kernels.EncodeChans(cs)); err != nil {
			return err
		}
	}
	return e.setupNet()
}

// uploadSems writes rank r's semaphores' initial values to dst.
func uploadSems(g *ir.GPU, r int, dst cuda.DevicePtr) error {
	if len(g.Semaphores) == 0 {
		return nil
	}
	b := make([]byte, 4*len(g.Semaphores))
	for i, s := range g.Semaphores {
		if s.InitValue < 0 {
			return fmt.Errorf("gpus[%d].semaphores[%d]: negative init_value", r, i)
		}
		binary.LittleEndian.PutUint32(b[4*i:], uint32(s.InitValue))
	}
	return cuda.MemcpyHtoD(dst, b)
}

// Rank is this process's rank; Plan the plan it runs.
func (e *RankExecutor) Rank() int      { return e.rank }
func (e *RankExecutor) Plan() *ir.Plan { return e.k.p }

// Close frees what Open made: the stream (after its work), the device
// state, the kernels and, after every rank's Close (a barrier, as in
// RankBuffers.Free), the plan's semaphore regions. Collective. Buffers
// are freed by their own Free, before Close.
func (e *RankExecutor) Close() error { return closeonce.Close(&e.mu, &e.closed, e.closeLocked) }

// closeLocked is Close's work, done once with e.mu held.
func (e *RankExecutor) closeLocked() error {
	// It launches no more: no peer of this process waits for it now.
	e.stopRounds()
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	rs := e.rs
	if err := e.drain(); err != nil {
		keep(err)
	} else {
		keep(e.unreported())
	}
	// The peers' kernels use this rank's sync region (and any buffers
	// left) until they end: wait for every rank's Close before they go.
	if e.conns != nil {
		keep(e.settle("closing"))
	}
	if n := len(e.sets); n > 0 {
		keep(fmt.Errorf("cudaexec: rank %d: Close with %d buffer sets not freed (freed now)", e.rank, n))
		for b := range e.sets {
			keep(b.free())
		}
	}
	keep(e.closeNet())
	rs.free(keep)
	for _, f := range e.k.fns {
		keep(f.mod.Unload())
	}
	e.k.fns = map[fnKey]*fnEntry{}
	if e.pulse != nil {
		keep(e.pulse.close())
	}
	if e.conns != nil {
		keep(e.conns.Close())
	}
	if e.rounds != nil {
		e.rounds.leave(e.rank)
	}
	return errors.Join(errs...)
}

// RankBuffers are this rank's input, output and scratch for one message
// size, in one allocation of the cuda device, and the node's other
// ranks' mapped here.
type RankBuffers struct {
	e       *RankExecutor
	size    int64
	in, out int64
	mems    []comm.Memory // by rank; nil off this node
	bufs    []bufSet      // by rank, as this process addresses them
	lay     *ir.Layout    // this rank's
	binds   map[rankBindKey]*rankBinding
	netID   uint16 // the buffer set's number on the socket transport
	freed   bool
}

type rankBindKey struct {
	dt     ir.DType
	ll     int
	reduce ir.ReduceOp
}

// rankBinding is one (type, packet width, reduction) on a buffer set:
// the op tables and launch arguments in device memory.
type rankBinding struct {
	fn      *fnEntry
	mem     cuda.DevicePtr
	args    cuda.DevicePtr
	smem    uint32
	threads uint32
}

// rankAlign is where each of a rank's buffers starts in its allocation
// (ir.Plan.Region): at 256 bytes, as cuMemAlloc aligns an allocation, each
// buffer is aligned as if it had been allocated alone.
const rankAlign = 256

// Alloc allocates this rank's buffers for a message of size bytes (within
// the plan's size rule) and maps every node-local rank's. Collective:
// every rank calls it with the same size.
func (e *RankExecutor) Alloc(ctx context.Context, size int64) (*RankBuffers, error) {
	p := e.k.p
	if err := e.c.SameInt64(ctx, "message size", size); err != nil {
		return nil, err
	}
	if err := e.k.rule.Check(size); err != nil {
		return nil, fmt.Errorf("cudaexec: %w", err)
	}
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, fmt.Errorf("cudaexec: %w", err)
	}
	var scratch int64 = 32
	var own *ir.Layout
	for r := range p.GPUs {
		lay, err := p.Layout(r, in, out)
		if err != nil {
			return nil, fmt.Errorf("cudaexec: gpus[%d]: %w", r, err)
		}
		scratch = max(scratch, lay.ScratchAlloc)
		if r == e.rank {
			own = lay
		}
	}
	reg := p.Region(e.rank, in, out, scratch, rankAlign)
	mem, err := e.dev.Alloc(reg.Total)
	if err != nil {
		return nil, fmt.Errorf("cudaexec: rank %d: %d bytes of buffers: %w", e.rank, reg.Total, err)
	}
	mems, err := e.c.Exchange(ctx, mem)
	if err != nil {
		mem.Close()
		return nil, err
	}
	b := &RankBuffers{e: e, size: size, in: in, out: out, mems: mems, bufs: make([]bufSet, len(p.GPUs)), lay: own,
		binds: map[rankBindKey]*rankBinding{}}
	for r, m := range mems {
		if m == nil {
			continue
		}
		g := p.Region(r, in, out, scratch, rankAlign)
		if m.Size() < g.Total {
			b.free()
			return nil, fmt.Errorf("cudaexec: rank %d shared %d bytes of buffers, the plan needs %d at %d bytes", r, m.Size(), g.Total, size)
		}
		base := uint64(m.(*cudadev.Memory).Ptr())
		b.bufs[r] = bufSet{in: base + uint64(g.InOff), out: base + uint64(g.OutOff), scratch: base + uint64(g.ScratchOff),
			inN: g.InBytes, outN: g.OutBytes, scratchN: scratch}
	}
	e.netBufs(b, scratch)
	e.sets[b] = struct{}{}
	return b, nil
}

// Size is the message size the buffers were allocated for.
func (b *RankBuffers) Size() int64 { return b.size }

// Input and Output are this rank's buffers on the device (InBytes and
// OutBytes long; the same memory, or part of it, for in-place plans).
func (b *RankBuffers) Input() cuda.DevicePtr  { return cuda.DevicePtr(b.bufs[b.e.rank].in) }
func (b *RankBuffers) Output() cuda.DevicePtr { return cuda.DevicePtr(b.bufs[b.e.rank].out) }
func (b *RankBuffers) InBytes() int64         { return b.in }
func (b *RankBuffers) OutBytes() int64        { return b.out }

// SetInput copies data (InBytes long) into this rank's input.
func (b *RankBuffers) SetInput(data []byte) error {
	if b.freed {
		return diag.Errorc(diag.CodeBroken, "cudaexec: buffers freed")
	}
	if int64(len(data)) != b.in {
		return diag.Errorc(diag.CodeSizeRefused, "cudaexec: input of %d bytes, the buffers hold %d", len(data), b.in)
	}
	return cuda.MemcpyHtoD(b.Input(), data)
}

// OutputOf copies rank r's output (r on this node, read through its
// mapping here), for checks that read every rank's result after a
// barrier.
func (b *RankBuffers) OutputOf(r int) ([]byte, error) {
	if b.freed {
		return nil, diag.Errorc(diag.CodeBroken, "cudaexec: buffers freed")
	}
	if r < 0 || r >= len(b.mems) || b.mems[r] == nil {
		return nil, fmt.Errorf("cudaexec: rank %d's buffers are not mapped here", r)
	}
	out := make([]byte, b.out)
	if err := cuda.MemcpyDtoH(out, cuda.DevicePtr(b.bufs[r].out)); err != nil {
		return nil, fmt.Errorf("cudaexec: reading rank %d's output: %w", r, err)
	}
	return out, nil
}

// Free waits for this rank's work, then for every rank to call Free (a
// barrier: it is collective, like Alloc), then frees the op tables and
// unmaps or frees the buffers. The barrier is there for legacy IPC
// memory, which the exporter owns: freed while a peer's kernel still
// reads or writes it, that kernel would fault. When a peer has failed
// there is no barrier to wait for, and the memory goes at once.
func (b *RankBuffers) Free() error {
	b.e.mu.Lock()
	defer b.e.mu.Unlock()
	if b.freed {
		return nil
	}
	err := b.e.drain()
	if err == nil {
		err = b.e.unreported()
	}
	return errors.Join(err, b.e.settle("freeing buffers"), b.free())
}

// unreported reports a hang of a launch nobody waited for: Start's
// without a Wait, or the last Enqueue (an enqueued launch's watchdog is
// read by the next launch, and the last one has none). Unread, such a
// hang and the wrong results it left went unnoticed: the capi GPU test's
// collectives each waited out a watchdog and returned partial sums with
// no error anywhere. Called after drain, by Free and Close.
func (e *RankExecutor) unreported() error {
	if e.broken != nil || e.rs == nil || e.rs.watch == nil {
		return nil // reported already, or nothing ever launched
	}
	return e.watchdog()
}

// settle is the barrier before this rank frees memory its peers map,
// skipped when the job has failed (nobody would arrive).
func (e *RankExecutor) settle(what string) error {
	if e.c.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.c.Timeout())
	defer cancel()
	if err := e.c.Bootstrap().Barrier(ctx); err != nil {
		return fmt.Errorf("cudaexec: rank %d: waiting for the other ranks before %s: %w", e.rank, what, err)
	}
	return nil
}

func (b *RankBuffers) free() error {
	if b.freed {
		return nil
	}
	b.freed = true
	delete(b.e.sets, b)
	errs := []error{b.e.drain()}
	if b.e.nr != nil {
		errs = append(errs, b.e.nr.unregister(b))
	}
	for _, rb := range b.binds {
		errs = append(errs, cuda.Free(rb.mem))
	}
	b.binds = nil
	for _, m := range b.mems {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	b.mems = nil
	return errors.Join(errs...)
}

// bind returns the binding of (dt, ll, red) on b, building the op tables
// (the same builder as Executor's, over the peers' addresses as mapped
// here) and launch arguments on first use. Building one is collective:
// the driver calls it makes (loading the kernel, allocating and
// uploading the tables) run in a step of every rank (inStep,
// rankload.go), because in one process they may wait for the GPU to
// drain, peers' spinning kernels included. Every rank makes the same
// bindings in the same order (it runs the same collectives), so every
// rank reaches the step.
func (e *RankExecutor) bind(b *RankBuffers, dt ir.DType, ll int, red ir.ReduceOp) (*rankBinding, error) {
	key := rankBindKey{dt, ll, red}
	if rb := b.binds[key]; rb != nil {
		return rb, nil
	}
	// Refused alike by every rank, before anything collective.
	red, rerr := checkReduce(e.k.p, red, dt)
	if rerr != nil {
		return nil, rerr
	}
	// Host work first, outside the step (an NVRTC compile may take
	// seconds, which the step's timeout is not for); its error goes
	// through the step so that the peers learn of it instead of waiting.
	var name string
	var img []byte
	var blob []byte
	var offsAt, argsAt int64
	var smem uint32
	var hostErr error
	if e.k.fns[fnKey{dt, ll}] == nil {
		name, img, hostErr = e.k.kernelImage(dt, ll)
	}
	if hostErr == nil {
		tb := &tableBuilder{p: e.k.p, rank: e.rank, lay: b.lay, bufs: b.bufs, reduce: red}
		var tables []kernels.Table
		if tables, hostErr = tb.build(); hostErr == nil {
			blob, offsAt, argsAt, smem, hostErr = packTables(tables, e.rank)
		}
	}
	var rb *rankBinding
	err := inStep(e.c, e.rank, fmt.Sprintf("loading its kernel and op tables (%s, %s, LL%d)", dt, red, ll), func() error {
		if hostErr != nil {
			return hostErr
		}
		if img != nil {
			if _, err := e.k.loadKernel(dt, ll, name, img); err != nil {
				return err
			}
		}
		var err error
		rb, err = e.upload(b, e.k.fns[fnKey{dt, ll}], blob, offsAt, argsAt, smem)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.binds[key] = rb
	return rb, nil
}

// upload puts a binding's packed tables and launch arguments in device
// memory and sizes the kernel's shared memory for them.
func (e *RankExecutor) upload(b *RankBuffers, fn *fnEntry, blob []byte, offsAt, argsAt int64, smem uint32) (*rankBinding, error) {
	dev, err := cuda.Malloc(int64(len(blob)))
	if err != nil {
		return nil, err
	}
	rs := e.rs
	a := kernels.Args{Tables: uint64(dev), TableOff: uint64(dev) + uint64(offsAt)}
	a.Mem, a.Port, a.Sems, a.Barriers = uint64(rs.memChans), uint64(rs.portChan), uint64(rs.sems), uint64(rs.barriers)
	a.Epoch, a.Done, a.Watch = uint64(rs.epoch), uint64(rs.doneCnt), uint64(rs.watch.Dev)
	a.TimeoutNs, a.Rank, a.NBlocks = uint64(e.k.opt.Timeout.Nanoseconds()), uint32(e.rank), uint32(rs.nblocks)
	if e.k.p.DoubleScratch {
		a.ScratchHalf = uint64(b.bufs[e.rank].scratchN / 2)
	}
	// The kernel copies port channels within the node itself
	// (PortCopySM); a FIFO only when some lead to another node.
	fifoArgs(&a, rs, e.k.opt.FifoEntries)
	copy(blob[argsAt:], a.Encode())
	if err := cuda.MemcpyHtoD(dev, blob); err != nil {
		cuda.Free(dev)
		return nil, err
	}
	rb := &rankBinding{fn: fn, mem: dev, args: dev + cuda.DevicePtr(argsAt), smem: smem, threads: uint32(e.k.p.NumThreadsPerBlock)}
	fail := func(err error) (*rankBinding, error) {
		cuda.Free(dev)
		return nil, err
	}
	if int(smem) > fn.smem {
		if err := fn.fn.SetMaxDynamicSharedMemory(int(smem)); err != nil {
			return fail(fmt.Errorf("op table of %d bytes does not fit in shared memory: %w", smem, err))
		}
		fn.smem = int(smem)
	}
	per, err := fn.fn.MaxActiveBlocksPerSM(int(rb.threads), int(smem))
	if err != nil {
		return fail(err)
	}
	if err := residentError(e.k.p.Name, int(e.k.dev), 1, rs.nblocks, int(rb.threads), int(smem), per, e.k.sms); err != nil {
		return fail(err)
	}
	return rb, nil
}

// Run runs the collective once on this rank: it launches the rank's
// kernel on its stream and waits for it. ll is the LL packet width (8 or
// 16; 0 means 16). Every rank runs the same sequence of collectives.
func (e *RankExecutor) Run(ctx context.Context, b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.launch(b, dt, red, ll, e.rs.stream); err != nil {
		return err
	}
	return e.wait()
}

// Start enqueues the collective on this rank's stream and returns: the
// buffers may be read or overwritten only after Wait. Back-to-back
// launches queue on the stream (the ranks free-run against each other,
// as every plan's proof allows), so a timed loop pays no wait per launch
// on the GPU. Ranks that are threads of one process return only once each
// of them has submitted the same launch (launch rounds, rankrounds.go):
// call it from every rank's own thread.
func (e *RankExecutor) Start(ctx context.Context, b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.launch(b, dt, red, ll, e.rs.stream)
}

// Prepare builds what a launch of (dt, red, ll) on b needs (op tables,
// the kernel) without launching, so that Enqueue makes no other driver
// call than the launch: legal inside a CUDA graph capture. Building is
// collective (bind): every rank prepares, or first launches, the same
// (b, dt, red, ll) at the same point of its sequence of collectives.
func (e *RankExecutor) Prepare(b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.usable(b); err != nil {
		return err
	}
	ll, err := llOf(ll)
	if err != nil {
		return err
	}
	_, err = e.bind(b, dt, ll, red)
	return err
}

// Enqueue launches the collective on s, a stream of this process's
// context (the caller's: it orders with the caller's work, and a capture
// of s records it), without waiting. Do not mix it with Start or Run
// unless s and the rank's own stream are ordered: two launches of one
// rank must not overlap. Like Start, it returns once every rank of the
// job in this process has submitted its launch (rankrounds.go), so each
// rank calls it from a thread of its own. The watchdog of an enqueued launch is read by
// the next Enqueue, Run or Wait, which then report a hang.
//
// Free and Close wait for the launches Enqueue made outside a capture
// (an event recorded on s behind each); a captured launch runs when its
// graph is replayed, on a stream this rank never sees, so replays are
// the caller's to wait for before Free or Close, as for any work of its
// own on memory it frees. Nothing here synchronizes the context: ranks
// that are threads of one process capture at the same time, and
// cuCtxSynchronize is refused while any stream of the context captures,
// invalidating that capture (the GPU run of capi's TestCUDACommGPU: one
// rank's Close spoiled the others' captures).
func (e *RankExecutor) Enqueue(b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int, s *cuda.Stream) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enqueue(b, dt, red, ll, s)
}

// enqueue is Enqueue with e.mu held; EnqueueStaged's launch too.
func (e *RankExecutor) enqueue(b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int, s *cuda.Stream) error {
	if err := e.watchdog(); err != nil {
		e.refused()
		return err
	}
	// Asked before the launch (cuStreamIsCapturing is legal in a capture;
	// an event recorded in one could never be waited for outside it).
	st, err := s.CaptureStatus()
	if err != nil {
		e.refused()
		return fmt.Errorf("cudaexec: rank %d: %w", e.rank, err)
	}
	// The event is recorded after the round (launch): nothing of this
	// rank's goes into the caller's stream's queue before every rank of
	// this process has queued its kernel.
	if err := e.launch(b, dt, red, ll, s); err != nil {
		return err
	}
	if st != cuda.CaptureNone {
		return nil
	}
	if err := e.rs.done.Record(s); err != nil {
		return fmt.Errorf("cudaexec: rank %d: marking the launch for Free and Close: %w", e.rank, err)
	}
	e.recorded = true
	return nil
}

// drain waits for every launch of this rank it can know of: its own
// stream's, and the last one Enqueue made on a caller's stream outside a
// capture (see Enqueue). Only this rank's own stream and event are
// waited for, which other threads' captures allow.
func (e *RankExecutor) drain() error {
	if e.rs == nil || e.rs.stream == nil {
		return nil
	}
	err := e.rs.stream.Synchronize()
	if e.recorded {
		err = errors.Join(err, e.rs.done.Synchronize())
	}
	if err == nil && e.np != nil {
		err = e.np.drain(e.k.opt.Timeout)
	}
	return err
}

// Wait waits for every launch Start enqueued and reports the watchdog's
// findings.
func (e *RankExecutor) Wait() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return diag.Errorc(diag.CodeBroken, "cudaexec: executor closed")
	}
	return e.wait()
}

// usable refuses a launch on a closed or broken executor, on buffers
// not its own, or once a peer has failed.
func (e *RankExecutor) usable(b *RankBuffers) error {
	if e.closed {
		return diag.Errorc(diag.CodeBroken, "cudaexec: executor closed")
	}
	if b == nil || b.e != e || b.freed {
		return diag.Errorc(diag.CodeBroken, "cudaexec: Run on buffers this executor did not allocate, or freed ones")
	}
	if e.broken != nil {
		return diag.Errorc(diag.CodeBroken, "cudaexec: rank %d unusable after an earlier failure: %w", e.rank, e.broken)
	}
	if err := e.c.Err(); err != nil {
		return fmt.Errorf("cudaexec: rank %d: %w", e.rank, err)
	}
	return nil
}

func llOf(ll int) (int, error) {
	if ll == 0 {
		return 16, nil
	}
	if ll != 8 && ll != 16 {
		return 0, fmt.Errorf("cudaexec: LL packet width must be 8 or 16 bytes, got %d", ll)
	}
	return ll, nil
}

// launch submits one launch of the collective on s and, when other ranks
// of the job are threads of this process, returns only once each of them
// has submitted its launch of the same collective (rankrounds.go): what
// anyone queues next can then never sit, in a hardware queue the driver
// made two ranks' streams share, ahead of a peer's launch that this
// one's kernel waits for. A refused launch counts without waiting.
func (e *RankExecutor) launch(b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int, s *cuda.Stream) error {
	err := e.submit(b, dt, red, ll, s)
	if e.rounds == nil {
		return err
	}
	if rerr := e.rounds.round(e.rank, err == nil, e.c); err == nil && rerr != nil {
		// Its kernel runs, and a peer's never came: the counters are out
		// of step, as after a hang.
		e.broken = rerr
		err = rerr
	}
	if e.broken != nil {
		e.stopRounds()
	}
	return err
}

func (e *RankExecutor) submit(b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int, s *cuda.Stream) error {
	if err := e.usable(b); err != nil {
		return err
	}
	ll, err := llOf(ll)
	if err != nil {
		return err
	}
	rb, err := e.bind(b, dt, ll, red)
	if err != nil {
		return err
	}
	arg := uint64(rb.args)
	grid, block := [3]uint32{uint32(e.rs.nblocks), 1, 1}, [3]uint32{rb.threads, 1, 1}
	if e.k.opt.StageInKernel {
		// The _stage instance's second parameter, by value (the driver
		// copies it during the call; with no spans the kernel does what
		// the plain instance does).
		err = rb.fn.fn.Launch(grid, block, rb.smem, s, unsafe.Pointer(&arg), unsafe.Pointer(&e.stage))
	} else {
		err = rb.fn.fn.Launch(grid, block, rb.smem, s, unsafe.Pointer(&arg))
	}
	if err != nil {
		e.broken = err
		return fmt.Errorf("cudaexec: launching rank %d: %w", e.rank, err)
	}
	return nil
}

// wait polls the stream until the kernel ends, then reads the watchdog.
// A peer's death (the communicator's verdict) does not end the kernel,
// whose waits give up only at the watchdog timeout, but it is named in
// whatever error the kernel ends with: a hang behind a dead peer is the
// dead peer's fault.
func (e *RankExecutor) wait() error {
	for spin := 0; ; spin++ {
		done, err := e.rs.stream.Query()
		if err != nil {
			return e.fail(err)
		}
		if done {
			break
		}
		if spin > 100 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return e.watchdog()
}

// watchdog reports the blocks the kernel's watchdog stopped, if any (the
// records are mapped host memory, written only when a wait gives up).
func (e *RankExecutor) watchdog() error {
	var h HangError
	for i := 0; i < e.rs.nblocks; i++ {
		if w, ok := kernels.DecodeWatch(e.rs.watch.Bytes[i*kernels.WatchBytes:]); ok {
			h.Stuck = append(h.Stuck, w)
		}
	}
	if len(h.Stuck) > 0 {
		if err := e.netFailure(); err != nil {
			return e.fail(fmt.Errorf("%w; %w", err, &h))
		}
		if e.c.Err() == nil && e.pulse != nil {
			if fr := e.pulse.frozen(); len(fr) > 0 {
				return e.fail(fmt.Errorf("%s; %w", frozenNote(fr), &h))
			}
		}
		return e.fail(&h)
	}
	return nil
}

// fail marks the executor broken and names a failed peer if there is one.
func (e *RankExecutor) fail(err error) error {
	e.broken = err
	e.stopRounds()
	if pe := e.c.Err(); pe != nil {
		return fmt.Errorf("cudaexec: rank %d: %w (%s)", e.rank, pe, strings.TrimPrefix(err.Error(), "cudaexec: "))
	}
	return fmt.Errorf("cudaexec: rank %d: %w", e.rank, err)
}
