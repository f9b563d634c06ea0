package cudaexec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Buffers are every rank's input and output for one message size. For
// in-place plans they alias as the collective defines: one buffer for
// allreduce, the input inside the output for allgather (at rank·input
// bytes), the output inside the input for reducescatter.
type Buffers struct {
	Size     int64 // message bytes as nccl-tests counts them
	In, Out  []cuda.DevicePtr
	InBytes  int64
	OutBytes int64
	owned    []cuda.DevicePtr
	ownedCtx []*cuda.Context // the context each owned pointer was allocated in (nil: the fallback)
	// stage, for a size outside the plan's rule: buffers at the next size
	// the rule admits, which the plan runs on; Run copies the pieces in
	// and out around each rank's kernel (stage.go).
	stage *Buffers
}

// Alloc allocates buffers for a message of size bytes on every rank.
func (e *Executor) Alloc(size int64) (*Buffers, error) {
	if !e.rule.Admits(size) {
		return e.allocStaged(size)
	}
	return e.alloc(size)
}

// alloc allocates buffers of exactly size bytes (any size BufferBytes
// accepts).
func (e *Executor) alloc(size int64) (*Buffers, error) {
	in, out, err := e.p.BufferBytes(size)
	if err != nil {
		return nil, err
	}
	n := len(e.p.GPUs)
	b := &Buffers{Size: size, In: make([]cuda.DevicePtr, n), Out: make([]cuda.DevicePtr, n), InBytes: in, OutBytes: out}
	var rs *rankRes
	alloc := func(k int64) (p cuda.DevicePtr, err error) {
		err = rs.do(func() error {
			if p, err = cuda.Malloc(k); err != nil {
				return err
			}
			b.owned, b.ownedCtx = append(b.owned, p), append(b.ownedCtx, rs.ctx)
			// Zeroed, as the CPU executor's buffers start.
			return cuda.Memset8(p, 0, k)
		})
		return p, err
	}
	for r := 0; r < n; r++ {
		rs = e.ranks[r]
		switch {
		case !e.p.InPlace:
			if b.In[r], err = alloc(in); err == nil {
				b.Out[r], err = alloc(out)
			}
		case e.p.Collective.Gathers():
			if b.Out[r], err = alloc(out); err == nil {
				b.In[r] = b.Out[r] + cuda.DevicePtr(int64(r)*in)
			}
		case e.p.Collective.Scatters():
			if b.In[r], err = alloc(in); err == nil {
				b.Out[r] = b.In[r] + cuda.DevicePtr(int64(r)*out)
			}
		default:
			if b.In[r], err = alloc(max(in, out)); err == nil {
				b.Out[r] = b.In[r]
			}
		}
		if err != nil {
			b.Free()
			return nil, err
		}
	}
	return b, nil
}

// Wrap describes caller-owned buffers; the caller keeps them alive and
// aliased as Alloc would for in-place plans.
func (e *Executor) Wrap(size int64, in, out []cuda.DevicePtr) (*Buffers, error) {
	inN, outN, err := e.p.BufferBytes(size)
	if err != nil {
		return nil, err
	}
	if len(in) != len(e.p.GPUs) || len(out) != len(e.p.GPUs) {
		return nil, diag.Errorc(diag.CodeRanks, "cudaexec: need %d input and output buffers, got %d and %d", len(e.p.GPUs), len(in), len(out))
	}
	b := &Buffers{Size: size, In: append([]cuda.DevicePtr(nil), in...), Out: append([]cuda.DevicePtr(nil), out...), InBytes: inN, OutBytes: outN}
	if !e.rule.Admits(size) {
		if b.stage, err = e.stageFor(size); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Free releases buffers that Alloc made.
func (b *Buffers) Free() error {
	var first firstErr
	for i, p := range b.owned {
		first.keep(freeOn(b.ownedCtx[i], p))
	}
	b.owned, b.ownedCtx = nil, nil
	if b.stage != nil {
		first.keep(b.stage.Free())
		b.stage = nil
	}
	return first.err
}

// Call is one collective: buffers, element type, reduction (applied where
// the plan says sum or nothing), LL packet width (8 or 16; 0 means 16),
// and the stream it is ordered on (nil: the ranks' own streams, joined by
// Wait).
type Call struct {
	Buffers *Buffers
	DType   ir.DType
	Reduce  ir.ReduceOp
	LLWidth int
	Stream  *cuda.Stream
}

type bindKey struct {
	ptrs   string // every rank's input and output address
	size   int64
	dt     ir.DType
	ll     int
	reduce ir.ReduceOp
}

// binding is everything a (buffers, size, type) combination needs on the
// device: scratch, op tables and launch arguments, uploaded once.
type binding struct {
	key     bindKey
	in, out []cuda.DevicePtr // the buffer addresses the key spells, for serves
	pins    int              // captured graphs that point at this binding's memory
	sg      *Graph           // the fan-out as a graph, for Run on a caller's stream (runstream.go)
	fn      *fnEntry
	rfn     []*fnEntry       // per rank: fn, or its device's copy with Options.Devices
	args    []cuda.DevicePtr // per rank: Args struct
	mem     []cuda.DevicePtr // per rank: scratch, then per rank: tables + args
	memCtx  []*cuda.Context  // the context each of mem was allocated in (nil: the fallback)
	smem    uint32
	threads uint32
}

func (b *binding) free() error {
	var first firstErr
	first.keep(b.sg.Destroy())
	b.sg = nil
	for i, p := range b.mem {
		if p != 0 {
			first.keep(freeOn(b.memCtx[i], p))
		}
	}
	b.mem, b.memCtx = nil, nil
	return first.err
}

const maxBindings = 16

func llWidth(c *Call) int {
	if c.LLWidth == 0 {
		return 16
	}
	return c.LLWidth
}

// keyOf names the binding a call uses.
func (e *Executor) keyOf(c *Call) bindKey {
	return bindKey{ptrKey(c.Buffers), c.Buffers.Size, c.DType, llWidth(c), c.Reduce}
}

func (e *Executor) bind(c *Call) (*binding, error) {
	bf := c.Buffers
	if bf == nil || len(bf.In) != len(e.p.GPUs) || len(bf.Out) != len(e.p.GPUs) {
		return nil, errors.New("cudaexec: call without buffers for every rank")
	}
	ll := llWidth(c)
	// A training or serving loop calls with the same buffers every time:
	// the last binding answers without spelling a key (no allocation).
	if b := e.last; b != nil && b.serves(bf, c.DType, ll, c.Reduce) {
		return b, nil
	}
	key := e.keyOf(c)
	if b := e.binds[key]; b != nil {
		e.last = b
		return b, nil
	}
	// Buffers is a plain struct a caller can fill in: check its size
	// once per binding, off the cached path.
	if err := e.rule.Check(bf.Size); err != nil {
		return nil, fmt.Errorf("cudaexec: %w", err)
	}
	red, err := checkReduce(e.p, c.Reduce, c.DType)
	if err != nil {
		return nil, err
	}
	rfn, err := e.rankFunctions(c.DType, ll)
	if err != nil {
		return nil, err
	}
	fn := rfn[0]
	n := len(e.p.GPUs)
	lays := make([]*ir.Layout, n)
	bufs := make([]bufSet, n)
	for r := 0; r < n; r++ {
		if lays[r], err = e.p.Layout(r, bf.InBytes, bf.OutBytes); err != nil {
			return nil, fmt.Errorf("gpus[%d]: %w", r, err)
		}
		inN, outN := bf.InBytes, bf.OutBytes
		if e.p.InPlace {
			// The aliased buffer is addressable as a whole through either name.
			inN, outN = max(inN, outN), max(inN, outN)
			if e.p.Collective.Gathers() {
				inN = bf.InBytes
			}
			if e.p.Collective.Scatters() {
				outN = bf.OutBytes
			}
		}
		bufs[r] = bufSet{in: uint64(bf.In[r]), out: uint64(bf.Out[r]), inN: inN, outN: outN, scratchN: lays[r].ScratchAlloc}
	}
	// Every rank gets the largest scratch of any rank: a writer adds its
	// own half offset to a peer's scratch address, so the halves must be
	// the same size everywhere (ranks of one plan may need different
	// amounts).
	var scratchN int64
	for r := 0; r < n; r++ {
		scratchN = max(scratchN, lays[r].ScratchAlloc)
	}
	scratchN = max(scratchN, 32)
	for r := range bufs {
		bufs[r].scratchN = scratchN
	}
	b := &binding{fn: fn, rfn: rfn, args: make([]cuda.DevicePtr, n), mem: make([]cuda.DevicePtr, n), memCtx: make([]*cuda.Context, n),
		threads: uint32(e.p.NumThreadsPerBlock)}
	// Scratch first (its address goes into the tables), then tables.
	for r := 0; r < n; r++ {
		rs := e.ranks[r]
		err := rs.do(func() error {
			p, err := cuda.Malloc(scratchN)
			if err != nil {
				return err
			}
			b.mem[r], b.memCtx[r] = p, rs.ctx // scratch; tables get their own allocation below
			bufs[r].scratch = uint64(p)
			return cuda.Memset8(p, 0, scratchN)
		})
		if err != nil {
			b.free()
			return nil, err
		}
	}
	for r := 0; r < n; r++ {
		tb := &tableBuilder{p: e.p, rank: r, lay: lays[r], bufs: bufs, reduce: red}
		tables, err := tb.build()
		if err != nil {
			b.free()
			return nil, err
		}
		blob, offsAt, argsAt, smem, err := packTables(tables, r)
		if err != nil {
			b.free()
			return nil, err
		}
		b.smem = max(b.smem, smem)
		rs := e.ranks[r]
		var dev cuda.DevicePtr
		if err := rs.do(func() (err error) { dev, err = cuda.Malloc(int64(len(blob))); return err }); err != nil {
			b.free()
			return nil, err
		}
		b.mem, b.memCtx = append(b.mem, dev), append(b.memCtx, rs.ctx)
		a := kernels.Args{
			Tables: uint64(dev), TableOff: uint64(dev) + uint64(offsAt),
			Mem: uint64(rs.memChans), Port: uint64(rs.portChan), Sems: uint64(rs.sems), Barriers: uint64(rs.barriers),
			Epoch: uint64(rs.epoch), Done: uint64(rs.doneCnt), Watch: uint64(rs.watch.Dev),
			TimeoutNs: uint64(e.opt.Timeout.Nanoseconds()), Rank: uint32(r), NBlocks: uint32(rs.nblocks),
		}
		if e.p.DoubleScratch {
			a.ScratchHalf = uint64(scratchN / 2)
		}
		if e.tl != nil {
			a.Trace, a.TraceCap = uint64(e.tl.bufs[r]), uint32(e.opt.Trace)
		}
		fifoArgs(&a, rs, e.opt.FifoEntries)
		copy(blob[argsAt:], a.Encode())
		if err := rs.do(func() error { return cuda.MemcpyHtoD(dev, blob) }); err != nil {
			b.free()
			return nil, err
		}
		b.args[r] = dev + cuda.DevicePtr(argsAt)
	}
	for r, f := range b.rfn {
		if int(b.smem) <= f.smem {
			continue
		}
		if err := e.ranks[r].do(func() error { return f.fn.SetMaxDynamicSharedMemory(int(b.smem)) }); err != nil {
			b.free()
			return nil, fmt.Errorf("op table of %d bytes does not fit in shared memory: %w", b.smem, err)
		}
		f.smem = int(b.smem)
	}
	if err := e.checkResident(b); err != nil {
		b.free()
		return nil, err
	}
	if err := e.evict(); err != nil {
		b.free()
		return nil, err
	}
	b.key = key
	b.in, b.out = append([]cuda.DevicePtr(nil), bf.In...), append([]cuda.DevicePtr(nil), bf.Out...)
	e.binds[key] = b
	e.order = append(e.order, key)
	e.last = b
	return b, nil
}

// serves reports whether the binding was made for these buffers, type,
// packet width and reduction (what keyOf spells, compared in place).
func (b *binding) serves(bf *Buffers, dt ir.DType, ll int, red ir.ReduceOp) bool {
	k := b.key
	if k.size != bf.Size || k.dt != dt || k.ll != ll || k.reduce != red || len(bf.In) != len(b.in) || len(bf.Out) != len(b.out) {
		return false
	}
	for i := range b.in {
		if bf.In[i] != b.in[i] || bf.Out[i] != b.out[i] {
			return false
		}
	}
	return true
}

// ptrKey spells every buffer address, so that buffers reallocated at a
// recycled rank-0 address never reuse tables that point at freed memory.
func ptrKey(b *Buffers) string {
	k := make([]byte, 0, 16*len(b.In))
	for i := range b.In {
		k = binary.LittleEndian.AppendUint64(k, uint64(b.In[i]))
		k = binary.LittleEndian.AppendUint64(k, uint64(b.Out[i]))
	}
	return string(k)
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// Prepare compiles and uploads what Run needs for c, so that a later Run
// (or a CUDA-graph capture of it) makes only launch-path driver calls.
// The executor keeps the 16 most recent (buffers, size, type, reduction)
// bindings; a captured graph stays valid while its binding is among them.
func (e *Executor) Prepare(c Call) error {
	b, err := e.bind(&c)
	// Ranks on several devices fan out without a graph (onStream).
	if err != nil || c.Stream == nil || b.sg != nil || (c.Buffers != nil && c.Buffers.stage != nil) || e.spread() {
		return err
	}
	// Run on a caller's stream launches the fan-out as a graph
	// (runstream.go): capture it here, off the timed path.
	b.sg, err = e.streamGraph(e.launches(b))
	return err
}

// launches is the work of a Run of binding b without staging: each rank's
// kernel on the rank's stream.
func (e *Executor) launches(b *binding) func(r int, rs *rankRes) error {
	return func(r int, rs *rankRes) error {
		if err := b.rfn[r].fn.LaunchPtr([3]uint32{uint32(rs.nblocks), 1, 1}, [3]uint32{b.threads, 1, 1}, b.smem, rs.stream, uint64(b.args[r])); err != nil {
			return fmt.Errorf("launching rank %d: %w", r, err)
		}
		return nil
	}
}

// Run enqueues the collective: one kernel per rank on the rank's stream,
// ordered after c.Stream's earlier work and before its later work (when
// given). Without a stream it makes ranks driver calls; on a caller's
// stream, a cached graph of the fan-out: three (runstream.go), or
// 1 + 4·ranks while that stream is being captured or the buffers are
// staged. It can be captured into a CUDA graph after Prepare.
func (e *Executor) Run(c Call) error {
	if e.broken != nil {
		return e.brokenErr()
	}
	user := c.Buffers
	var st *Buffers
	if user != nil && user.stage != nil {
		if err := e.checkStaged(user, c.DType); err != nil {
			return err
		}
		st = user.stage
		c.Buffers = st
	}
	b, err := e.bind(&c)
	if err != nil {
		return err
	}
	if st == nil {
		return e.onStream(c.Stream, &b.sg, e.launches(b))
	}
	return e.fanOut(c.Stream, func(r int, rs *rankRes) error {
		if err := e.copyIn(r, user, st, rs.stream); err != nil {
			return err
		}
		if err := e.launches(b)(r, rs); err != nil {
			return err
		}
		return e.copyOut(r, user, st, rs.stream)
	})
}

// fanOut enqueues work for every rank on the rank's stream, forked from
// and joined back into s (when given) with events: how Run launches a
// plan, and how a Reference launches its kernel, so that both are timed
// the same way.
func (e *Executor) fanOut(s *cuda.Stream, work func(r int, rs *rankRes) error) error {
	// Work that runs now (not captured into a graph for later) goes after
	// the last graph launch and is what a later one must wait for
	// (runstream.go).
	live := true
	if s != nil {
		st, err := s.CaptureStatus()
		if err != nil {
			return err
		}
		live = st == cuda.CaptureNone
	}
	if live {
		if err := e.afterGraphs(); err != nil {
			return err
		}
		e.rankTail = true
	}
	if s != nil {
		if err := e.fork.Record(s); err != nil {
			return err
		}
	}
	for r, rs := range e.ranks {
		if err := rs.do(func() error { return e.rankWork(s, r, rs, work) }); err != nil {
			return err
		}
		if s != nil {
			// The caller's stream may wait on another device's event.
			if err := s.WaitEvent(rs.done); err != nil {
				return err
			}
		}
	}
	return nil
}

// rankWork is fanOut's part on rank r's stream, in the rank's context:
// wait for the fork on s, the work, record the rank's done event.
func (e *Executor) rankWork(s *cuda.Stream, r int, rs *rankRes, work func(r int, rs *rankRes) error) error {
	if s != nil {
		if err := rs.stream.WaitEvent(e.fork); err != nil {
			return err
		}
	}
	if err := work(r, rs); err != nil {
		return err
	}
	if s != nil {
		return rs.done.Record(rs.stream)
	}
	return nil
}

func (e *Executor) brokenErr() error {
	return diag.Errorc(diag.CodeBroken, "cudaexec: executor unusable after an earlier failure: %w", e.broken)
}

// Wait blocks until the work enqueued so far is done (on s, or on every
// rank's stream when s is nil) and returns the watchdog's report if any
// block timed out.
func (e *Executor) Wait(s *cuda.Stream) error {
	if s != nil {
		if err := s.Synchronize(); err != nil {
			return err
		}
	}
	if err := e.syncRanks(); err != nil {
		return err
	}
	if e.proxy != nil {
		// Port puts may still be in flight after the kernels end (a plan
		// need not flush last): finish them before anyone reads or frees.
		heads := make([]uint64, len(e.proxy.ranks))
		var b [8]byte
		for i, pr := range e.proxy.ranks {
			if err := cuda.MemcpyDtoH(b[:], pr.head); err != nil {
				return err
			}
			heads[i] = binary.LittleEndian.Uint64(b[:])
		}
		if err := e.proxy.drain(heads, e.opt.Timeout); err != nil {
			e.broken = err
			return err
		}
	}
	return e.Check()
}

// HangError lists every block the watchdog stopped.
type HangError struct {
	Stuck []kernels.WatchRecord
	// Proxy describes each port proxy queue at the time of the hang (proxy
	// copy mode only): which side a stuck port channel waited on.
	Proxy []string
}

func (h *HangError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "watchdog: %d block(s) stuck:", len(h.Stuck))
	for _, w := range h.Stuck {
		fmt.Fprintf(&b, "\n  rank %d block %d op %d: %s", w.Rank, w.Block, w.Op, w.What())
		switch w.Kind {
		case kernels.WatchSignal, kernels.WatchFlush:
			fmt.Fprintf(&b, " on %s channel %d", ir.ChannelType(w.ChanType), w.Channel)
			if w.Peer >= 0 {
				fmt.Fprintf(&b, " (peer rank %d)", w.Peer)
			}
			fmt.Fprintf(&b, ": expected token %d, saw %d", w.Expected, w.Seen)
		case kernels.WatchPacket:
			fmt.Fprintf(&b, ": expected flag %d, saw %d", w.Expected, w.Seen)
		case kernels.WatchBarrier:
			fmt.Fprintf(&b, " %d: %d of %d blocks arrived", w.Channel, w.Seen, w.Expected)
			if w.Channel == kernels.StageBarrier {
				b.WriteString(" (the staging grid barrier, before the kernel's input copies end or its output copies begin)")
			}
		case kernels.WatchSemaphore:
			fmt.Fprintf(&b, " %d: value %d", w.Channel, w.Seen)
		}
	}
	for _, q := range h.Proxy {
		fmt.Fprintf(&b, "\n  %s", q)
	}
	return b.String()
}

// Check reads the watchdog records without waiting. After a hang the
// channel counters are out of step, so the executor refuses further runs.
func (e *Executor) Check() error {
	var h HangError
	for _, rs := range e.ranks {
		for i := 0; i < rs.nblocks; i++ {
			if w, ok := kernels.DecodeWatch(rs.watch.Bytes[i*kernels.WatchBytes:]); ok {
				h.Stuck = append(h.Stuck, w)
			}
		}
	}
	if e.proxy != nil {
		if err := e.proxy.err(); err != nil {
			e.broken = err
			return err
		}
	}
	if len(h.Stuck) > 0 {
		if e.proxy != nil {
			h.Proxy = e.proxy.describe()
		}
		e.broken = &h
		return &h
	}
	return nil
}
