package host

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// run is one launch of the plan on this rank.
type run struct {
	e     *Executor
	b     *Buffers
	ctx   context.Context
	dt    cpu.DType
	red   ir.ReduceOp
	flag  uint32 // LL packet flag of this launch
	half  int64  // which scratch half (double scratch), 0 or 1
	abort atomic.Bool
	mu    sync.Mutex
	stuck []Stuck
	cause error // a failed peer or a cancelled context; nil for a timeout
}

// Stuck is a block the watchdog stopped: the op and what it waited for.
type Stuck struct {
	At      string // gpus[r].threadblocks[b].ops[i]
	Op      string
	Waiting string
	// TimedOut marks the block whose wait ran past the timeout (the
	// others were stopped with it).
	TimedOut bool
}

// HangError is a launch the watchdog stopped: a wait ran past the
// timeout, or a peer failed (Cause), while these blocks waited.
type HangError struct {
	Rank    int
	Timeout time.Duration
	Cause   error
	Stuck   []Stuck
	// Frozen are the ranks of this node whose process showed no sign of
	// life (stopped, or hung outside the plan's waits) when the watchdog
	// fired.
	Frozen []int
}

func (h *HangError) Error() string {
	var b strings.Builder
	if h.Cause != nil {
		fmt.Fprintf(&b, "rank %d stopped: %v; ", h.Rank, h.Cause)
	} else {
		fmt.Fprintf(&b, "rank %d: watchdog: a wait ran past %v; ", h.Rank, h.Timeout)
	}
	if len(h.Frozen) > 0 {
		who := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(h.Frozen)), ", "), "[]")
		if len(h.Frozen) == 1 {
			fmt.Fprintf(&b, "rank %s shows no sign of life (its process is stopped or hung); ", who)
		} else {
			fmt.Fprintf(&b, "ranks %s show no sign of life (their processes are stopped or hung); ", who)
		}
	}
	for i, s := range h.Stuck {
		if i > 0 {
			b.WriteString("; ")
		}
		mark := ""
		if s.TimedOut {
			mark = " [timed out]"
		}
		fmt.Fprintf(&b, "%s (%s) waits for %s%s", s.At, s.Op, s.Waiting, mark)
	}
	return b.String()
}

func (h *HangError) Unwrap() error { return h.Cause }

// Run runs one launch of the plan on this rank's buffers, with element
// type dt and reduction red (where the plan says sum or nothing; a
// reduction the plan does not serve is refused, none means its own), and
// returns when every block of this rank is done, as a kernel ends: peers
// may still be running. Every rank runs the same sequence of launches.
func (e *Executor) Run(ctx context.Context, b *Buffers, dt cpu.DType, red ir.ReduceOp) error {
	// A plan whose reduce_op fixes one reduction serves that one only;
	// none asked means the plan's own (ir.Plan.RunReduce).
	red, err := e.p.RunReduce(red)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	if err := cpu.CheckReduction(dt, red); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return diag.Errorc(diag.CodeBroken, "host: executor closed")
	case b == nil || b.e != e || b.views == nil:
		return diag.Errorc(diag.CodeBroken, "host: buffers not allocated by this executor, or freed")
	}
	if err := e.c.Err(); err != nil {
		return fmt.Errorf("host: rank %d: %w", e.rank, err)
	}
	if in := int64(dt.Size()); b.in%in != 0 || b.out%in != 0 {
		return diag.Errorc(diag.CodeSizeRefused, "host: buffers of %d and %d bytes are not whole %s elements", b.in, b.out, dt)
	}
	l := e.launches
	e.launches++
	rn := &run{e: e, b: b, ctx: ctx, dt: dt, red: red, flag: uint32(l + 1)}
	if e.p.DoubleScratch {
		rn.half = int64(l % 2)
	}
	errs := rn.blocks(b.progs, b.size <= inlineMax, cpudev.LockedThread(ctx))
	if len(rn.stuck) > 0 {
		h := &HangError{Rank: e.rank, Timeout: e.opt.Timeout, Cause: rn.cause, Stuck: rn.stuck}
		if h.Cause == nil {
			// A peer that waits forever is a plan's deadlock; one whose
			// process stopped is a fault to name.
			h.Frozen = e.frozen()
		}
		return h
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// blk is one thread block's private state.
type blk struct {
	id    int
	red   cpu.Reducer
	arena []byte // temporaries of the current op
	srcs  [][]byte
	// yield hands the caller's thread back to block 0's pauses (or,
	// once block 0 is done, to run.blocks) from a block run as a
	// coroutine; nil otherwise.
	yield func(struct{}) bool
	// moved: the block passed a wait since it last yielded.
	moved bool
	// drive is set on block 0 of an inline launch: it runs on the
	// caller's goroutine and its pauses resume the other blocks.
	drive *driver
}

// driver resumes an inline launch's coroutine blocks from the caller's
// goroutine and paces the thread.
type driver struct {
	nexts []func() (struct{}, bool) // by block; nil for block 0 and a block done
	bls   []*blk
	live  int // coroutines not done
	bo    cpudev.Backoff
}

// round resumes each coroutine block once, until it yields or ends,
// then backs off unless a block moved (moved: block 0 reached a new
// wait).
func (d *driver) round(moved bool) {
	for i, next := range d.nexts {
		if next == nil {
			continue
		}
		if _, ok := next(); !ok {
			d.nexts[i], d.live, moved = nil, d.live-1, true
		} else if d.bls[i].moved {
			moved = true
		}
	}
	if moved {
		d.bo.Reset()
	} else {
		d.bo.Pause()
	}
}

// inlineMax is the largest message whose blocks run as coroutines on the
// caller's thread rather than each on a goroutine: small messages are
// all waiting, and a thread hand-off costs more than the whole call;
// large ones are reductions and copies that several cores share.
const inlineMax = 64 << 10

// blocks runs the rank's blocks and returns their errors by block.
// Inline, block 0 runs on the calling goroutine and the others as
// coroutines (iter.Pull, whose switches stay on this thread even when it
// is a C thread's, locked to its goroutine): a block that finds its wait
// unmet yields, block 0's pause resumes the others in turn, and only when
// a whole round of blocks is waiting does the thread back off
// (cpudev.Backoff: spin, sched_yield, nanosleep), never parking in the
// Go scheduler (locked: the caller's goroutine is locked to its thread,
// so not even runtime.Gosched). Block 0 needs no coroutine of its own,
// whose start and stack growth would cost µs a launch. Otherwise each
// block is a goroutine, as blocks may wait on each other.
func (rn *run) blocks(progs [][]xop, inline, locked bool) []error {
	if !inline && len(progs) > 1 {
		return par.Each(len(progs), func(i int) error { return rn.block(&blk{id: i}, progs[i]) })
	}
	errs := make([]error, len(progs))
	if len(progs) == 0 {
		return errs
	}
	d := &driver{nexts: make([]func() (struct{}, bool), len(progs)), bls: make([]*blk, len(progs)), live: len(progs) - 1, bo: cpudev.Backoff{Locked: locked}}
	for i := 1; i < len(progs); i++ {
		bl := &blk{id: i}
		d.bls[i] = bl
		var stop func()
		d.nexts[i], stop = iter.Pull(func(yield func(struct{}) bool) {
			bl.yield = yield
			errs[i] = rn.block(bl, progs[i])
		})
		// Ends a coroutine still suspended if a block panics (the
		// panic reaches the caller through next).
		defer stop()
	}
	errs[0] = rn.block(&blk{id: 0, drive: d}, progs[0])
	for d.live > 0 {
		d.round(false)
	}
	return errs
}

// pause waits between two polls of the block's current wait, i the
// number of polls so far: a coroutine yields to block 0, block 0 runs
// a round of the others (driver.round), a goroutine spins, yields its
// P, then sleeps (it may share the P with blocks that it waits for). It
// returns false when the coroutine was stopped.
func (bl *blk) pause(i int) bool {
	switch {
	case bl.yield != nil:
		bl.moved = i == 0
		return bl.yield(struct{}{})
	case bl.drive != nil:
		bl.drive.round(i == 0)
	case i < 64:
	case i < 256:
		runtime.Gosched()
	default:
		time.Sleep(time.Duration(min(i-255, 50)) * 2 * time.Microsecond)
	}
	return true
}

// tmp returns n bytes of the block's arena, valid until the next op.
func (bl *blk) tmp(n int64) []byte {
	if int64(cap(bl.arena)-len(bl.arena)) < n {
		bl.arena = make([]byte, 0, max(2*cap(bl.arena), int(n)))
	}
	s := bl.arena[len(bl.arena) : int64(len(bl.arena))+n]
	bl.arena = bl.arena[:int64(len(bl.arena))+n]
	return s
}

// errStopped ends a block whose wait was stopped (it is in run.stuck).
var errStopped = fmt.Errorf("stopped")

func (rn *run) block(bl *blk, prog []xop) error {
	for i := range prog {
		x := &prog[i]
		if x.code != ir.OpPipeline {
			if err := rn.exec(bl, x, 0, 1<<62); err != nil {
				return err
			}
			continue
		}
		for it := int64(0); it < x.iters; it++ {
			for j := range x.body {
				if err := rn.exec(bl, &x.body[j], it*x.unit, x.unit); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// await polls until ready holds, pausing between polls (blk.pause); it
// gives up (recording what the block waits for) past the timeout, when
// another block gave up, when a peer failed, or when ctx ends. Those
// checks (a clock read, two channels) cost more than a poll, so they run
// every watchEvery pauses, and at once when another block gave up.
func (rn *run) await(bl *blk, x *xop, ready func() bool, what func() string) error {
	if ready() {
		return nil
	}
	start := time.Now()
	dead, done := rn.e.c.Dead(), rn.ctx.Done()
	for i := 0; ; i++ {
		if i%watchEvery == 0 || rn.abort.Load() {
			timedOut := false
			var cause error
			select {
			case <-dead:
				cause = rn.e.c.Err()
			default:
			}
			select {
			case <-done:
				cause = cmp.Or(cause, rn.ctx.Err())
			default:
			}
			if cause == nil {
				timedOut = time.Since(start) > rn.e.opt.Timeout
			}
			if timedOut || cause != nil || rn.abort.Load() {
				if ready() { // a peer that failed may have done its part
					return nil
				}
				rn.mu.Lock()
				if cause != nil && rn.cause == nil {
					rn.cause = cause
				}
				rn.stuck = append(rn.stuck, Stuck{At: x.at, Op: x.code.String(), Waiting: what(), TimedOut: timedOut})
				rn.mu.Unlock()
				rn.abort.Store(true)
				return errStopped
			}
		}
		if !bl.pause(i) {
			return errStopped
		}
		if ready() {
			return nil
		}
	}
}

// watchEvery is how many pauses of a wait pass between the watchdog's
// checks: at most a few ms late in the sleeping phase, against timeouts
// of seconds.
const watchEvery = 8

// clip narrows a reference to a pipeline window.
func clip(r *ref, w, unit int64) (off, n int64) {
	return ir.Window(r.off, r.n, w, unit)
}

// size is the reference's payload bytes, for ir.WindowBytes.
func (r *ref) size() int64 { return r.n }

// opBytes is what an op moves in this window: the smallest of its
// references (they agree in every well-formed plan).
func opBytes(x *xop, w, unit int64) int64 {
	return ir.WindowBytes(x.src, x.dst, (*ref).size, w, unit)
}

// mem is n data bytes of a rank's buffer at payload offset off.
func (rn *run) mem(rank int, typ ir.BufferType, off, n int64) []byte {
	v := &rn.b.views[rank]
	switch typ {
	case ir.BufInput:
		return v.in[off : off+n]
	case ir.BufOutput:
		return v.out[off : off+n]
	}
	h := rn.half * v.half
	return v.scratch[h+off : h+off+n]
}

// pkts are the packets carrying payload bytes [off, off+n) of a rank's
// scratch: one 8-byte word (4 bytes of payload, then the flag) per 4
// payload bytes.
func (rn *run) pkts(rank int, off, n int64) []atomic.Uint64 {
	v := &rn.b.views[rank]
	raw := rn.half*v.half + 2*off
	if n <= 0 {
		return nil
	}
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&v.scratch[raw])), n/4)
}

func writePkts(w []atomic.Uint64, data []byte, flag uint32) {
	for i := range w {
		w[i].Store(uint64(flag)<<32 | uint64(binary.LittleEndian.Uint32(data[4*i:])))
	}
}

// readPkts waits for this launch's flag on every packet and returns the
// payload.
func (rn *run) readPkts(bl *blk, x *xop, rank int, off, n int64) ([]byte, error) {
	w := rn.pkts(rank, off, n)
	out := bl.tmp(n)
	for i := range w {
		v := w[i].Load()
		if uint32(v>>32) != rn.flag {
			err := rn.await(bl, x, func() bool { v = w[i].Load(); return uint32(v>>32) == rn.flag }, func() string {
				return fmt.Sprintf("the LL packet at rank %d scratch payload byte %d (flag %d, found %d)", rank, off+4*int64(i), rn.flag, uint32(v>>32))
			})
			if err != nil {
				return nil, err
			}
		}
		binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
	}
	return out, nil
}

// pktBytes rounds a packet op's byte count down to whole packets (LL16
// packets carry 8 bytes of payload, LL8 packets 4).
func (rn *run) pktBytes(n int64) int64 { return n - n%int64(rn.e.opt.LLWidth/2) }

// reduction is the op's reduction for this run.
func (rn *run) reduction(x *xop) (ir.ReduceOp, error) {
	switch x.reduce {
	case ir.ReduceNone, ir.ReduceSum:
		return rn.red, nil
	}
	if err := cpu.CheckReduction(rn.dt, x.reduce); err != nil {
		return "", fmt.Errorf("host: %s: %w", x.at, err)
	}
	return x.reduce, nil
}

func (rn *run) end(slot, i int) *chanEnd { return &rn.e.ends[slot][i] }

func (rn *run) signal(x *xop, i int) {
	e := rn.end(ir.ChanSlot(x.ctype), i)
	if x.ctype == ir.ChanPort && e.net != nil {
		rn.e.prox.push(preq{net: e.net, space: rn.e.space, netSignal: true, ch: uint32(e.partner)})
		return
	}
	if x.ctype == ir.ChanPort {
		rn.e.prox.push(preq{signal: e.remote, end: e})
		return
	}
	e.remote.Add(1)
}

func (rn *run) flush(bl *blk, x *xop) error {
	p := rn.e.prox
	t := p.issued.Load()
	var netErr error
	err := rn.await(bl, x, func() bool {
		if p.done.Load() < t {
			return false
		}
		// Sent to other nodes is not done: wait for the peers' acks
		// (possibly of a few later requests too: a flush may wait longer,
		// never shorter).
		pending, err := p.netPending()
		netErr = err
		return !pending
	}, func() string {
		if h := p.busy(0); h != "" {
			return fmt.Sprintf("the port proxy of rank %d to finish request %d (done %d): %s", rn.e.rank, t, p.done.Load(), h)
		}
		return fmt.Sprintf("the port proxy of rank %d to finish request %d (done %d, or a peer on another node to acknowledge)", rn.e.rank, t, p.done.Load())
	})
	if err == nil && netErr != nil {
		return fmt.Errorf("host: %s: %w", x.at, netErr)
	}
	return err
}
