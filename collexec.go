package msccl

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// collState is a communicator's collectives: the plans it chose, each
// opened once per size it runs at (opening and allocating are
// collective: every rank runs the same calls in the same order, so every
// rank opens them in the same order), and the lock that serialises its
// calls.
type collState struct {
	mu     sync.Mutex
	dev    collDevice
	closed bool
	chosen map[choiceKey]*Plan   // the selection's plan per (collective, size)
	keys   map[*Plan][32]byte    // plan content hashes, made once per plan
	execs  map[execKey]collExec  // opened plans
	order  []execKey             // opening order, closed in reverse
	ready  map[readyKey]struct{} // (plan, size, type, reduction) prepared
	self   [][]byte              // sends of this rank to itself, not yet received
	seq    uint64                // collectives run on several ranks so far
	// explain names a mismatch of calls across ranks in a hang's error
	// (collmatch.go); nil in tests without a job.
	explain func(err error, mine string) error
	// entered, when set (tests), is called by each call once it holds
	// the communicator, and what it returns when the call lets go.
	entered func() (left func())
}

type choiceKey struct {
	c    Collective
	size int64
}

// execKey names a plan by content, not by pointer: the same plan compiled
// or loaded separately on every rank gets the same key everywhere.
type execKey struct {
	plan [32]byte
	size int64 // the size it runs at
}

type readyKey struct {
	execKey
	dt  DType
	red ReduceOp
}

// collDevice is where a communicator's collectives run: the cpu device
// (hostDevice) or the cuda device (gpuDevice).
type collDevice interface {
	name() string
	// open opens plan p at message size bytes on this rank (collective).
	open(ctx context.Context, p *Plan, size int64) (collExec, error)
	// capturing reports whether stream is being captured into a graph.
	capturing(stream uintptr) (bool, error)
	// copy copies src to dst on stream: a world of one rank.
	copy(dst, src Mem, stream uintptr) error
	// setup runs f, the opening and preparing of plans, off any capture.
	setup(f func() error) error
}

// collExec is one plan opened at one size on this rank.
type collExec interface {
	// bytes are the registered buffers' lengths.
	bytes() (in, out int64)
	// prepare builds what a run of (dt, red) needs, without running.
	prepare(dt DType, red ReduceOp) error
	// run copies the spans of in into the registered input, runs the
	// plan and copies the spans of the registered output to out.
	run(ctx context.Context, dt DType, red ReduceOp, in Mem, ins []ir.Span, out Mem, outs []ir.Span, stream uintptr) error
	close() error
}

func newCollState(dev collDevice) *collState {
	return &collState{dev: dev, chosen: map[choiceKey]*Plan{}, keys: map[*Plan][32]byte{},
		execs: map[execKey]collExec{}, ready: map[readyKey]struct{}{}}
}

// do runs (or with prepare, readies) cl on rank of a world of n ranks.
func (s *collState) do(ctx context.Context, n, rank int, cl Call, prepare bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entered != nil {
		defer s.entered()()
	}
	if s.closed {
		return diag.Errorc(diag.CodeBroken, "msccl: the communicator is closed")
	}
	dev := s.dev.name()
	if cl.Stream != 0 && dev != "cuda" {
		return diag.Errorc(diag.CodeBadOptions, "msccl: stream %#x: the %s device runs collectives on the calling goroutine; pass 0", cl.Stream, dev)
	}
	for _, m := range []Mem{cl.In, cl.Out} {
		if m.lenOnly && !prepare {
			return diag.Errorc(diag.CodeBadOptions, "msccl: %s: a buffer without memory (LenOnly) is for Prepare", cl.Collective)
		}
		if m.n > 0 && !m.lenOnly && m.gpu != (dev == "cuda") {
			return diag.Errorc(diag.CodeBadOptions, "msccl: %s: a buffer of %s memory on the %s device (HostMem is the cpu device's, DeviceMem the cuda device's)", cl.Collective, map[bool]string{true: "device", false: "host"}[m.gpu], dev)
		}
	}
	if cl.Collective == ir.AllReduce || cl.Collective == ir.ReduceScatter || cl.Collective == ir.Reduce {
		if err := checkOp(&cl); err != nil {
			return err
		}
	} else {
		cl.Op = Sum // unused by plans that do not reduce
	}
	g, err := callGeometry(&cl, n, rank)
	if err != nil {
		return err
	}
	if err := checkPlan(&cl, n); err != nil {
		return err
	}
	if g.in == 0 && g.out == 0 {
		return nil // a count of 0, as NCCL allows
	}
	if n == 1 {
		// Every collective of one rank is its input, as its output.
		if prepare || !g.useIn || !g.useOut {
			return nil
		}
		return s.dev.copy(cl.Out, cl.In, cl.Stream)
	}
	p, err := s.plan(&cl, n, g)
	if err != nil {
		return err
	}
	key, err := s.key(p, cl.Collective.MessageSize(g.in, g.out))
	if err != nil {
		return err
	}
	capturing, err := s.dev.capturing(cl.Stream)
	if err != nil {
		return err
	}
	x, err := s.entry(ctx, p, key, readyKey{key, cl.DType, cl.Op}, capturing)
	if err != nil || prepare {
		return err
	}
	pin, pout := p.Collective.Pieces(int64(n))
	regIn, regOut := x.bytes()
	var ins, outs []ir.Span
	if g.useIn {
		ins = ir.StageSpans(pin, g.in/pin, regIn/pin, g.in/pin)
	}
	if g.useOut {
		outs = ir.StageSpans(pout, g.out/pout, g.out/pout, regOut/pout)
	}
	s.seq++
	err = x.run(ctx, cl.DType, cl.Op, cl.In, ins, cl.Out, outs, cl.Stream)
	if err != nil && s.explain != nil {
		err = s.explain(err, callDesc(s.seq, &cl, cl.Collective.MessageSize(g.in, g.out)))
	}
	return err
}

// checkPlan refuses a plan the caller gives for another collective,
// world or root.
func checkPlan(cl *Call, n int) error {
	p := cl.Plan
	switch {
	case p == nil:
	case p.Collective != cl.Collective:
		return diag.Errorc(diag.CodeBadOptions, "msccl: plan %q is for %s; this call is %s", p.Name, p.Collective, cl.Collective)
	case len(p.GPUs) != n:
		return diag.Errorc(diag.CodeBadOptions, "msccl: plan %q is for %d ranks; this communicator has %d", p.Name, len(p.GPUs), n)
	case p.Collective.Rooted() && p.Root != cl.Root:
		return diag.Errorc(diag.CodeBadOptions, "msccl: plan %q has root %d; this call's root is %d", p.Name, p.Root, cl.Root)
	}
	return nil
}

// locked runs f holding the communicator, as a collective would.
func (s *collState) locked(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return diag.Errorc(diag.CodeBroken, "msccl: the communicator is closed")
	}
	return f()
}

// plan is the plan cl runs: the caller's, checked; a rooted
// collective's library plan; or the selection table's row for the size.
func (s *collState) plan(cl *Call, n int, g geometry) (*Plan, error) {
	size := cl.Collective.MessageSize(g.in, g.out)
	p := cl.Plan
	switch {
	case p != nil:
		// checkPlan has judged it.
	case cl.Collective.Rooted():
		var err error
		if p, err = rootedPlanFor(cl.Collective, n, cl.Root); err != nil {
			return nil, err
		}
	default:
		ck := choiceKey{cl.Collective, size}
		if p = s.chosen[ck]; p == nil {
			var err error
			if p, err = SelectPlanStaged("", string(cl.Collective), n, size); err != nil {
				return nil, err
			}
			s.chosen[ck] = p
		}
	}
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, fmt.Errorf("msccl: plan %q: %w", p.Name, err)
	}
	if in != g.in || out != g.out {
		return nil, diag.Errorc(diag.CodeSizeRefused, "msccl: plan %q (%s) at %d bytes takes %d input and %d output bytes; got %d and %d", p.Name, p.Collective, size, in, out, g.in, g.out)
	}
	return p, nil
}

// key names p at the size a message of size bytes runs at: size itself
// when p's rule admits it, else the next size the rule admits (staged).
func (s *collState) key(p *Plan, size int64) (execKey, error) {
	h, ok := s.keys[p]
	if !ok {
		data, err := ir.Encode(p)
		if err != nil {
			return execKey{}, err
		}
		h = sha256.Sum256(data)
		s.keys[p] = h
	}
	rule, err := p.SizeRule()
	if err != nil {
		return execKey{}, fmt.Errorf("msccl: plan %q: %w", p.Name, err)
	}
	run := size
	if !rule.Admits(size) {
		next, ok := rule.Next(size)
		if !ok {
			return execKey{}, diag.Errorc(diag.CodeSizeRefused, "msccl: plan %q does not serve %d bytes: its sizes are %s", p.Name, size, rule)
		}
		run = next
	}
	return execKey{h, run}, nil
}

// entry returns p opened at key's size with rk's type and reduction
// prepared, opening and preparing on first use unless capturing, when
// that is refused: a capture records nothing of an allocation and fails
// on a synchronisation.
func (s *collState) entry(ctx context.Context, p *Plan, key execKey, rk readyKey, capturing bool) (collExec, error) {
	x := s.execs[key]
	if _, ok := s.ready[rk]; ok && x != nil {
		return x, nil
	}
	if capturing {
		return nil, diag.Errorc(diag.CodeBadOptions, "msccl: plan %q (%s) running at %d bytes with %s/%s is not prepared, and CUDA graph capture cannot allocate its buffers or load its kernel: run the collective once, or Prepare it, before capturing",
			p.Name, p.Collective, key.size, rk.dt, rk.red)
	}
	err := s.dev.setup(func() error {
		if x == nil {
			var err error
			if x, err = s.dev.open(ctx, p, key.size); err != nil {
				return err
			}
			s.execs[key] = x
			s.order = append(s.order, key)
		}
		return x.prepare(rk.dt, rk.red)
	})
	if err != nil {
		return nil, err
	}
	s.ready[rk] = struct{}{}
	return x, nil
}

// close closes the opened plans, newest first (collective on the cuda
// device: every rank closes the same plans in the same order).
func (s *collState) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	s.dev.setup(func() error {
		for i := len(s.order) - 1; i >= 0; i-- {
			errs = append(errs, s.execs[s.order[i]].close())
		}
		return nil
	})
	s.execs, s.order = nil, nil
	return errors.Join(errs...)
}

// hostDevice is the cpu device: plans run by RankExec on the calling
// goroutine, staging copies made with copy.
type hostDevice struct{ rc *RankComm }

func (hostDevice) name() string                    { return "cpu" }
func (hostDevice) capturing(uintptr) (bool, error) { return false, nil }
func (hostDevice) setup(f func() error) error      { return f() }

func (hostDevice) copy(dst, src Mem, _ uintptr) error {
	copy(dst.host, src.host)
	return nil
}

func (d hostDevice) open(ctx context.Context, p *Plan, size int64) (collExec, error) {
	ex, b, err := d.rc.openAt(ctx, p, size)
	if err != nil {
		return nil, err
	}
	return &hostExec{ex: ex, b: b}, nil
}

// openAt opens p on this rank with its buffers for size bytes
// (collective).
func (c *RankComm) openAt(ctx context.Context, p *Plan, size int64) (*RankExec, *RankBuffers, error) {
	ex, err := c.Open(ctx, p, Options{})
	if err != nil {
		return nil, nil, err
	}
	b, err := ex.Alloc(ctx, size)
	if err != nil {
		ex.Close()
		return nil, nil, err
	}
	return ex, b, nil
}

type hostExec struct {
	ex *RankExec
	b  *RankBuffers
}

func (x *hostExec) bytes() (int64, int64)         { return int64(len(x.b.Input())), int64(len(x.b.Output())) }
func (x *hostExec) prepare(DType, ReduceOp) error { return nil }
func (x *hostExec) close() error                  { return errors.Join(x.b.Free(), x.ex.Close()) }

func (x *hostExec) run(ctx context.Context, dt DType, red ReduceOp, in Mem, ins []ir.Span, out Mem, outs []ir.Span, _ uintptr) error {
	rin, rout := x.b.Input(), x.b.Output()
	for _, s := range ins {
		copy(rin[s.Dst:s.Dst+s.N], in.host[s.Src:s.Src+s.N])
	}
	if err := x.ex.Run(ctx, x.b, dt, red); err != nil {
		return err
	}
	for _, s := range outs {
		copy(out.host[s.Dst:s.Dst+s.N], rout[s.Src:s.Src+s.N])
	}
	return nil
}
