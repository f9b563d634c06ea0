package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/executor/wiring"
	"github.com/msccl-go/msccl-go/internal/closeonce"
	"github.com/msccl-go/msccl-go/internal/diag"
	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/internal/socket"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// Options configure Open.
type Options struct {
	// Timeout bounds one wait (a signal, a packet, a barrier, a
	// semaphore, a flush) before the watchdog ends the run; 0 means 10 s.
	Timeout time.Duration
	// LLWidth is the LL packet width, 8 or 16 bytes; 0 means 16.
	LLWidth int
	// ProxyHandler serves the port channels' requests to ranks on this
	// node (nil: the built-in copy and signal). It is called from the
	// rank's one proxy goroutine, in order; a handler that fails or
	// panics fails the run, and one that blocks is named by the
	// watchdog of the flush that waits for it.
	ProxyHandler proxyapi.Handler
}

// Executor runs one plan on this rank.
type Executor struct {
	c     *comm.Comm
	p     *ir.Plan
	rank  int
	opt   Options
	conns *comm.Connections
	ends  [2][]chanEnd // [0] memory, [1] port
	sems  []atomic.Int64
	bars  map[int]*atomic.Int64 // barrier id → arrivals so far (all launches)
	tbs   []*ir.ThreadBlock     // by id
	// passes counts, per block and barrier id, the barriers the block
	// has passed: barrier k of a block completes at arrival k*numTBs.
	passes []map[int]int64
	prox   *proxy
	// The socket transport (net.go): this executor's registration space
	// in the communicator, and its buffer sets by id for what peers on
	// other nodes put.
	space   uint32
	setsMu  sync.Mutex
	sets    map[uint16]*Buffers
	nextSet uint16
	// pulses are the node's ranks' liveness words (nil off node); this
	// rank's advances every pulsePeriod until Close.
	pulses    []*atomic.Uint64
	stopPulse chan struct{}
	pulsing   sync.WaitGroup

	mu       sync.Mutex // one Run at a time
	launches uint64     // launches started on this rank: flags and scratch halves
	closed   bool
}

// chanEnd is a channel end's semaphore words.
type chanEnd struct {
	peer     int
	index    int
	inbound  *atomic.Uint64
	remote   *atomic.Uint64 // nil when unpaired or on another node
	net      *socket.Conn   // the peer's connection when it is on another node
	partner  int            // the paired channel's index at the peer
	expected atomic.Uint64  // signals the waits so far consumed
}

// mapped returns the bytes of a Memory the CPU can address.
func mapped(m comm.Memory) ([]byte, error) {
	b, ok := m.(interface{ Bytes() []byte })
	if !ok {
		return nil, fmt.Errorf("memory of type %T is not addressable by the CPU (the host executor needs the cpu device)", m)
	}
	return b.Bytes(), nil
}

// word is the 8-byte semaphore word at loc.
func word(loc comm.Loc) (*atomic.Uint64, error) {
	b, err := mapped(loc.Mem)
	if err != nil {
		return nil, err
	}
	if loc.Off < 0 || loc.Off+8 > int64(len(b)) || loc.Off%8 != 0 {
		return nil, fmt.Errorf("semaphore word at byte %d of a %d-byte region", loc.Off, len(b))
	}
	return (*atomic.Uint64)(unsafe.Pointer(&b[loc.Off])), nil
}

// Open prepares p on this rank: it connects the plan's channels through
// c (collective: every rank calls Open with the same plan) and starts
// the rank's port proxy.
func Open(ctx context.Context, c *comm.Comm, p *ir.Plan, opt Options) (*Executor, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	if opt.LLWidth == 0 {
		opt.LLWidth = 16
	}
	if opt.LLWidth != 8 && opt.LLWidth != 16 {
		return nil, diag.Errorc(diag.CodeBadOptions, "host: LL packet width must be 8 or 16 bytes, got %d", opt.LLWidth)
	}
	if len(p.GPUs) != c.Size() {
		return nil, diag.Errorc(diag.CodeRanks, "host: plan %q has %d ranks, the job has %d", p.Name, len(p.GPUs), c.Size())
	}
	r := c.Rank()
	g := &p.GPUs[r]
	e := &Executor{c: c, p: p, rank: r, opt: opt, bars: map[int]*atomic.Int64{}}
	e.tbs = make([]*ir.ThreadBlock, len(g.ThreadBlocks))
	for i := range g.ThreadBlocks {
		e.tbs[i] = &g.ThreadBlocks[i]
	}
	sort.SliceStable(e.tbs, func(i, j int) bool { return e.tbs[i].ID < e.tbs[j].ID })
	for i, tb := range e.tbs {
		if tb.ID != i {
			return nil, fmt.Errorf("host: gpus[%d]: thread block ids must be 0..%d, found id %d", r, len(e.tbs)-1, tb.ID)
		}
	}
	var walk func(ops []ir.Op)
	walk = func(ops []ir.Op) {
		for i := range ops {
			if ops[i].Code == ir.OpBarrier && e.bars[ops[i].BarrierID()] == nil {
				e.bars[ops[i].BarrierID()] = new(atomic.Int64)
			}
			walk(ops[i].Ops())
		}
	}
	for _, tb := range e.tbs {
		walk(tb.Ops)
	}
	e.passes = make([]map[int]int64, len(e.tbs))
	for i := range e.passes {
		e.passes[i] = map[int]int64{}
	}
	e.sems = make([]atomic.Int64, len(g.Semaphores))
	for i, s := range g.Semaphores {
		e.sems[i].Store(int64(s.InitValue))
	}
	e.space = c.NewSpace()
	w, err := wiring.Of(p)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	conns, err := c.Connect(ctx, w)
	if err != nil {
		return nil, err
	}
	e.conns = conns
	for slot, cs := range [2][]comm.Channel{conns.Memory, conns.Port} {
		e.ends[slot] = make([]chanEnd, len(cs))
		for i, ch := range cs {
			end := &e.ends[slot][i]
			end.peer, end.index, end.net, end.partner = ch.Peer, i, ch.Net, ch.Partner
			if end.inbound, err = word(ch.Inbound); err != nil {
				conns.Close()
				return nil, fmt.Errorf("host: %w", err)
			}
			if ch.Remote.Mem != nil {
				if end.remote, err = word(ch.Remote); err != nil {
					conns.Close()
					return nil, fmt.Errorf("host: %w", err)
				}
			}
		}
	}
	e.pulses = make([]*atomic.Uint64, len(conns.Pulse))
	for q, loc := range conns.Pulse {
		if loc.Mem == nil {
			continue
		}
		if e.pulses[q], err = word(loc); err != nil {
			conns.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	e.prox = startProxy(r, opt.ProxyHandler)
	c.Register(e.space, e)
	e.stopPulse = make(chan struct{})
	e.pulsing.Add(1)
	go e.pulse()
	return e, nil
}

// pulsePeriod is how often a rank shows it is alive; frozenAfter how long
// a peer's pulse must stand still to call the peer frozen (generous: a
// loaded machine may not run a goroutine for a while).
const (
	pulsePeriod = 10 * time.Millisecond
	frozenAfter = 500 * time.Millisecond
	// closedPulse marks a rank whose executor closed: gone on purpose.
	closedPulse = ^uint64(0)
)

// pulse advances this rank's liveness word until Close.
func (e *Executor) pulse() {
	defer e.pulsing.Done()
	t := time.NewTicker(pulsePeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.pulses[e.rank].Add(1)
		case <-e.stopPulse:
			return
		}
	}
}

// frozen returns the node's other ranks whose pulse stood still for
// frozenAfter: processes that are stopped, or hung where no watchdog of
// theirs can report it.
func (e *Executor) frozen() []int {
	before := make([]uint64, len(e.pulses))
	for q, w := range e.pulses {
		if w != nil {
			before[q] = w.Load()
		}
	}
	time.Sleep(frozenAfter)
	var out []int
	for q, w := range e.pulses {
		if w != nil && q != e.rank && w.Load() == before[q] && before[q] != closedPulse {
			out = append(out, q)
		}
	}
	return out
}

// Rank is this process's rank in the plan.
func (e *Executor) Rank() int { return e.rank }

// Close stops the proxy and unmaps the semaphore words. Buffers are
// freed by their own Free.
func (e *Executor) Close() error { return closeonce.Close(&e.mu, &e.closed, e.closeLocked) }

// closeLocked is Close's work, done once with e.mu held.
func (e *Executor) closeLocked() error {
	close(e.stopPulse)
	e.pulsing.Wait()
	e.pulses[e.rank].Store(closedPulse)
	perr := e.prox.stop(e.opt.Timeout)
	e.c.Register(e.space, nil)
	if perr != nil {
		// A handler still blocked may wake up and signal: the
		// semaphore words stay mapped for it (leaked with its
		// goroutine) rather than fault under it.
		return perr
	}
	return e.conns.Close()
}

// view is a rank's buffers as mapped here.
type view struct {
	in, out, scratch []byte
	half             int64 // bytes of one scratch half (all of it without double scratch)
}

// Buffers are this rank's input, output and scratch for one message size,
// and the node's other ranks' mapped here.
type Buffers struct {
	e        *Executor
	size     int64
	in, out  int64
	mems     []comm.Memory
	views    []view  // by rank; zero for ranks off this node
	lims     []limit // by rank: buffer sizes, also of ranks off this node
	id       uint16  // the buffer set's number in puts from other nodes
	progs    [][]xop
	freeOnce sync.Once
}

// Alloc allocates this rank's buffers for a message of size bytes (as
// nccl-tests counts it) and maps every node-local rank's. Collective:
// every rank calls it with the same size.
func (e *Executor) Alloc(ctx context.Context, size int64) (*Buffers, error) {
	p := e.p
	// First, so that every rank reaches the all-gather before any refuses.
	if err := e.c.SameInt64(ctx, "message size", size); err != nil {
		return nil, err
	}
	rule, err := p.SizeRule()
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	if err := rule.Check(size); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	lays := make([]*ir.Layout, len(p.GPUs))
	regs := make([]ir.Region, len(p.GPUs))
	for r := range p.GPUs {
		if lays[r], err = p.Layout(r, in, out); err != nil {
			return nil, fmt.Errorf("host: gpus[%d]: %w", r, err)
		}
		// 64-byte (cache line) starts; at least 64 bytes in all, as
		// the cpu device maps no empty allocation.
		regs[r] = p.Region(r, in, out, lays[r].ScratchAlloc, 64)
		regs[r].Total = max(regs[r].Total, 64)
	}
	mem, err := e.c.Device().Alloc(regs[e.rank].Total)
	if err != nil {
		return nil, fmt.Errorf("host: rank %d: %d bytes of buffers: %w", e.rank, regs[e.rank].Total, err)
	}
	// Scratch starts as poison, not zeros (docs/model.md): a plan that
	// reads bytes nobody wrote gets NaNs or -1s rather than the zeros that
	// would hide it in a sum, and the packet flags (0xffffffff) match no
	// launch.
	if raw, err := mapped(mem); err == nil {
		g := regs[e.rank]
		poison(raw[g.ScratchOff : g.ScratchOff+lays[e.rank].ScratchAlloc])
	}
	mems, err := e.c.Exchange(ctx, mem)
	if err != nil {
		mem.Close()
		return nil, err
	}
	b := &Buffers{e: e, size: size, in: in, out: out, mems: mems, views: make([]view, len(p.GPUs)), lims: make([]limit, len(p.GPUs))}
	for r := range p.GPUs {
		b.lims[r] = limit{in: regs[r].InBytes, out: regs[r].OutBytes, half: lays[r].ScratchAlloc}
		if p.DoubleScratch {
			b.lims[r].half /= 2
		}
	}
	fail := func(err error) (*Buffers, error) {
		b.Free()
		return nil, err
	}
	for r, m := range mems {
		if m == nil {
			continue
		}
		raw, err := mapped(m)
		if err != nil {
			return fail(fmt.Errorf("host: %w", err))
		}
		g := regs[r]
		if int64(len(raw)) < g.Total {
			return fail(fmt.Errorf("host: rank %d shared %d bytes of buffers, the plan needs %d at %d bytes", r, len(raw), g.Total, size))
		}
		v := view{in: raw[g.InOff : g.InOff+g.InBytes], out: raw[g.OutOff : g.OutOff+g.OutBytes], scratch: raw[g.ScratchOff : g.ScratchOff+lays[r].ScratchAlloc]}
		v.half = lays[r].ScratchAlloc
		if p.DoubleScratch {
			v.half /= 2
		}
		b.views[r] = v
	}
	rs := resolver{p: p, rank: e.rank, lay: lays[e.rank], views: b.views, lims: b.lims, ends: e.ends}
	for _, tb := range e.tbs {
		prog, err := rs.block(tb)
		if err != nil {
			return fail(fmt.Errorf("host: %w", err))
		}
		b.progs = append(b.progs, prog)
	}
	e.register(b)
	return b, nil
}

// Input is this rank's input buffer; Output its output (the same bytes,
// or part of them, for in-place plans).
func (b *Buffers) Input() []byte  { return b.views[b.e.rank].in[:b.in] }
func (b *Buffers) Output() []byte { return b.views[b.e.rank].out[:b.out] }

// Size is the message size the buffers were allocated for.
func (b *Buffers) Size() int64 { return b.size }

// Free waits for the port proxy's pending copies, unmaps the peers'
// buffers and frees this rank's. Peers keep their own mappings, so a peer
// still running is not disturbed.
func (b *Buffers) Free() error {
	var errs []error
	b.freeOnce.Do(func() {
		// A launch ends without waiting for its port requests (as a
		// kernel does not wait for the proxy); they must land before
		// their memory is unmapped.
		if err := b.e.prox.drain(b.e.opt.Timeout); err != nil {
			errs = append(errs, err)
			return
		}
		b.e.unregister(b)
		for _, m := range b.mems {
			if m != nil {
				errs = append(errs, m.Close())
			}
		}
		b.views = nil
	})
	return errors.Join(errs...)
}

// OutputOf is rank r's output buffer as mapped here (r on this node),
// for checks that read every rank's result after a barrier.
func (b *Buffers) OutputOf(r int) ([]byte, error) {
	if b.views == nil {
		return nil, diag.Errorc(diag.CodeBroken, "host: buffers freed")
	}
	if r < 0 || r >= len(b.views) || b.views[r].out == nil {
		return nil, fmt.Errorf("host: rank %d's buffers are not mapped here", r)
	}
	return b.views[r].out[:b.out], nil
}

// poison fills b with 0xff bytes.
func poison(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = 0xff
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}
