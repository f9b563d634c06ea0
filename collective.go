package msccl

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The communicator's collectives on the caller's own buffers: the part
// every front end (Go, libmsccl for Python, the NCCL-compatible library)
// shares. A call names a collective and the caller's buffers; the
// communicator picks the proven plan (the selection table's, a library
// algorithm for rooted collectives, or the caller's), opens it once per
// (plan, size it runs at) and caches it, stages the caller's buffers in
// and out of the plan's registered buffers (padding sizes outside the
// plan's rule, ir/pieces.go), and runs it.

// Collective names a collective (ir.AllReduce, ...).
type Collective = ir.Collective

// Mem is one of the caller's buffers: host memory on the cpu device
// (HostMem), device memory of this process's GPU on the cuda device
// (DeviceMem). The zero Mem is an empty buffer, which rooted collectives
// take where NCCL ignores the argument (a non-root's output of Reduce).
type Mem struct {
	host    []byte
	dev     cuda.DevicePtr
	n       int64
	gpu     bool
	lenOnly bool
}

// DevicePtr is an address of device memory.
type DevicePtr = cuda.DevicePtr

// HostMem is b, host memory (the cpu device).
func HostMem(b []byte) Mem { return Mem{host: b, n: int64(len(b))} }

// HostPtr is n bytes of host memory at p (memory from C or ctypes,
// which the caller keeps alive for the call).
func HostPtr(p unsafe.Pointer, n int64) Mem {
	if p == nil || n <= 0 {
		return Mem{}
	}
	return HostMem(unsafe.Slice((*byte)(p), n))
}

// DeviceMem is n bytes of device memory at p (the cuda device).
func DeviceMem(p cuda.DevicePtr, n int64) Mem {
	if n <= 0 {
		return Mem{}
	}
	return Mem{dev: p, n: n, gpu: true}
}

// LenOnly is a length without memory, for Prepare, which reads only the
// lengths of a call's buffers.
func LenOnly(n int64) Mem {
	if n <= 0 {
		return Mem{}
	}
	return Mem{n: n, lenOnly: true}
}

// Len is the buffer's length in bytes.
func (m Mem) Len() int64 { return m.n }

// Call is one collective call. Every rank makes the same calls in the
// same order, as with NCCL; the calls of one communicator are
// serialised in the order they are made (each waits for the one before
// to be issued and, on the cpu device, done).
type Call struct {
	Collective Collective
	// In and Out are this rank's buffers; they may be the same memory
	// (in place). Lengths as NCCL's counts give them: allgather and
	// gather output n × input, reducescatter and scatter input n ×
	// output, the others equal. A rooted collective's argument NCCL
	// ignores (broadcast's and scatter's input off the root, reduce's
	// and gather's output off the root) may be empty.
	In, Out Mem
	DType   DType
	Op      ReduceOp // reductions only; "" is Sum
	Root    int      // rooted collectives
	// Plan runs instead of the communicator's choice; it must be for
	// this collective and world.
	Plan *Plan
	// Stream (cuda device) is the CUstream the call is queued on, behind
	// the caller's work and without waiting (0: the legacy default
	// stream); the cpu device runs on the calling goroutine and takes 0.
	Stream uintptr
}

// CallOption adds to a call what the common case leaves out.
type CallOption func(*Call)

// WithPlan runs p instead of the communicator's choice of plan.
func WithPlan(p *Plan) CallOption { return func(c *Call) { c.Plan = p } }

// OnStream queues the call on stream s (cuda device).
func OnStream(s uintptr) CallOption { return func(c *Call) { c.Stream = s } }

func (c *RankComm) call(ctx context.Context, cl Call, opts []CallOption) error {
	for _, o := range opts {
		o(&cl)
	}
	return c.Collective(ctx, cl)
}

// AllReduce reduces in over the ranks into out (same length).
func (c *RankComm) AllReduce(ctx context.Context, in, out Mem, dt DType, op ReduceOp, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.AllReduce, In: in, Out: out, DType: dt, Op: op}, opts)
}

// AllGather places every rank's in, rank by rank, in out (n × in).
func (c *RankComm) AllGather(ctx context.Context, in, out Mem, dt DType, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.AllGather, In: in, Out: out, DType: dt}, opts)
}

// ReduceScatter reduces in (n × out) over the ranks and gives rank r
// piece r of the result in out.
func (c *RankComm) ReduceScatter(ctx context.Context, in, out Mem, dt DType, op ReduceOp, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.ReduceScatter, In: in, Out: out, DType: dt, Op: op}, opts)
}

// AllToAll sends piece q of in to rank q, which stores it as its piece r
// of out (in and out the same length, n pieces).
func (c *RankComm) AllToAll(ctx context.Context, in, out Mem, dt DType, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.AllToAll, In: in, Out: out, DType: dt}, opts)
}

// Broadcast copies root's in to every rank's out.
func (c *RankComm) Broadcast(ctx context.Context, in, out Mem, dt DType, root int, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.Broadcast, In: in, Out: out, DType: dt, Root: root}, opts)
}

// Reduce reduces in over the ranks into root's out.
func (c *RankComm) Reduce(ctx context.Context, in, out Mem, dt DType, op ReduceOp, root int, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.Reduce, In: in, Out: out, DType: dt, Op: op, Root: root}, opts)
}

// Gather places every rank's in, rank by rank, in root's out (n × in).
func (c *RankComm) Gather(ctx context.Context, in, out Mem, dt DType, root int, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.Gather, In: in, Out: out, DType: dt, Root: root}, opts)
}

// Scatter gives rank r piece r of root's in (n × out) in out.
func (c *RankComm) Scatter(ctx context.Context, in, out Mem, dt DType, root int, opts ...CallOption) error {
	return c.call(ctx, Call{Collective: ir.Scatter, In: in, Out: out, DType: dt, Root: root}, opts)
}

// Collective runs cl on this rank: on the cpu device it returns when
// this rank's part is done; on the cuda device it is queued on
// cl.Stream. Calls of one communicator are serialised in call order.
func (c *RankComm) Collective(ctx context.Context, cl Call) error {
	return c.coll.do(ctx, c.Size(), c.Rank(), cl, false)
}

// Prepare readies cl without running it: the plan is chosen and opened
// at the size cl runs at, and on the cuda device its op tables and
// kernel are built, so that a CUDA graph capture of cl.Stream may record
// cl (capture cannot allocate). Collective: every rank prepares the same
// calls at the same point of its sequence, as the first run would.
func (c *RankComm) Prepare(cl Call) error {
	return c.coll.do(context.Background(), c.Size(), c.Rank(), cl, true)
}

// geometry checks a call's buffer lengths against the collective on
// world ranks and returns the full input and output lengths (an empty
// buffer a rooted collective ignores counts as its full length) and
// which of the caller's buffers take part here.
type geometry struct {
	in, out       int64 // full lengths, as the plan's buffers hold them
	useIn, useOut bool  // stage the caller's input in, output out
}

func callGeometry(cl *Call, world, rank int) (geometry, error) {
	n := int64(world)
	c := cl.Collective
	in, out := cl.In.n, cl.Out.n
	g := geometry{in: in, out: out, useIn: in > 0, useOut: out > 0}
	root := cl.Root == rank
	if c.Rooted() {
		if cl.Root < 0 || cl.Root >= world {
			return g, diag.Errorc(diag.CodeBadOptions, "msccl: %s: root %d is not a rank of %d", c, cl.Root, world)
		}
		// What NCCL ignores off the root may be empty; its length then
		// follows from the other buffer.
		pin, pout := c.Pieces(n)
		switch {
		case !root && (c == ir.Broadcast || c == ir.Scatter) && in == 0:
			g.in = out * pin / pout
		case !root && (c == ir.Reduce || c == ir.Gather) && out == 0:
			g.out = in * pout / pin
		}
	}
	pin, pout := c.Pieces(n)
	switch c {
	case ir.AllReduce, ir.AllGather, ir.ReduceScatter, ir.AllToAll, ir.Broadcast, ir.Reduce, ir.Gather, ir.Scatter:
	default:
		return g, diag.Errorc(diag.CodeBadOptions, "msccl: collective %q: want allreduce, allgather, reducescatter, alltoall, broadcast, reduce, gather or scatter", c)
	}
	if g.in*pout != g.out*pin {
		return g, diag.Errorc(diag.CodeSizeRefused, "msccl: %s on %d ranks takes %s; got %d input and %d output bytes", c, world, lengths(c), cl.In.n, cl.Out.n)
	}
	if g.in%pin != 0 || g.out%pout != 0 {
		return g, diag.Errorc(diag.CodeSizeRefused, "msccl: %s on %d ranks: %d input and %d output bytes do not split into %d and %d equal pieces", c, world, g.in, g.out, pin, pout)
	}
	es := int64(cl.DType.Size())
	if es <= 0 {
		return g, diag.Errorc(diag.CodeBadOptions, "msccl: data type %q: unknown", cl.DType)
	}
	if (g.in/pin)%es != 0 || (g.out/pout)%es != 0 {
		return g, diag.Errorc(diag.CodeSizeRefused, "msccl: %s: %d input bytes in %d pieces and %d output bytes in %d are not whole %s elements (%d bytes)", c, g.in, pin, g.out, pout, cl.DType, es)
	}
	return g, nil
}

// lengths says in words what buffer lengths a collective takes.
func lengths(c Collective) string {
	switch {
	case c.Gathers():
		return "an output of n × the input"
	case c.Scatters():
		return "an input of n × the output"
	}
	return "an input and an output of one length"
}

// checkOp refuses a reduction the executors do not know.
func checkOp(cl *Call) error {
	switch cl.Op {
	case "":
		cl.Op = Sum
	case Sum, Min, Max, Prod:
	default:
		return diag.Errorc(diag.CodeBadOptions, "msccl: reduction %q: want sum, min, max or prod", cl.Op)
	}
	return nil
}

// rootedPlans caches the library plans of rooted collectives per
// (collective, ranks, root): they are compiled with the root as a
// parameter and proven once (CompileAlgorithm).
var rootedPlans sync.Map // rootedKey -> *rootedPlan

type rootedKey struct {
	c           Collective
	ranks, root int
}

type rootedPlan struct {
	once sync.Once
	p    *Plan
	err  error
}

func rootedPlanFor(c Collective, ranks, root int) (*Plan, error) {
	v, _ := rootedPlans.LoadOrStore(rootedKey{c, ranks, root}, &rootedPlan{})
	rp := v.(*rootedPlan)
	rp.once.Do(func() {
		rp.p, rp.err = CompileAlgorithm("", string(c)+"_direct", map[string]int64{"ranks": int64(ranks), "root": int64(root)})
	})
	if rp.err != nil {
		return nil, fmt.Errorf("msccl: %s with root %d on %d ranks: %w", c, root, ranks, rp.err)
	}
	return rp.p, nil
}
