package msccl

import (
	"os"
	"path/filepath"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Plan is an execution plan (MSCCL++ v0.8+ JSON schema).
type Plan = ir.Plan

// Buffers are every rank's device input and output for one message size.
type Buffers = cudaexec.Buffers

// Stream is a CUDA stream; nil means the ranks' own streams.
type Stream = cuda.Stream

// DType is an element type.
type DType = ir.DType

// Element types.
const (
	F32  = ir.F32
	F16  = ir.F16
	BF16 = ir.BF16
	I32  = ir.I32
	U32  = ir.U32
	U8   = ir.U8
	// OCP FP8, upstream's __fp8_e4m3 and __fp8_e5m2. Reductions widen to
	// f32 and round once to nearest even; overflow saturates to ±448 and
	// ±57344 (executor/cpu/dtype.go has the rules).
	F8E4M3 = ir.F8E4M3
	F8E5M2 = ir.F8E5M2
)

// ReduceOp is the reduction applied where a plan says sum (or nothing).
type ReduceOp = ir.ReduceOp

// Reductions.
const (
	Sum  = ir.ReduceSum
	Min  = ir.ReduceMin
	Max  = ir.ReduceMax
	Prod = ir.ReduceProd // integer types only
)

// ErrNoGPU is returned (wrapped) by Open when no CUDA driver or device is
// present.
var ErrNoGPU = cuda.ErrNoDriver

// LoadPlan reads and validates a plan file.
func LoadPlan(path string) (*Plan, error) {
	p, _, err := ir.LoadFile(path)
	return p, err
}

// CompileAlgorithm compiles dir/NAME.msccl (dir "": the library embedded
// in the program, from any directory) with the given parameters (ranks,
// ...) and proves the plan (Prove) before returning it.
func CompileAlgorithm(dir, name string, defines map[string]int64) (*Plan, error) {
	path := filepath.Join(dir, name+".msccl")
	var src []byte
	var err error
	if dir == "" {
		// The library embedded in the program (package algorithms).
		path = "algorithms/" + name + ".msccl"
		src, err = algorithms.Source(name)
	} else {
		src, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	p, sm, ds := compiler.CompileSource(path, src, defines, compiler.Options{})
	if ds.HasErrors() {
		return nil, ds.Err() // the diagnostics, codes kept (ir.ErrorCode, errors.As with *ir.DiagError)
	}
	if err := Prove(p, sm); err != nil {
		return nil, err
	}
	return p, nil
}

// Options configure Open.
type Options struct {
	// Timeout bounds one wait inside the kernel before the watchdog stops
	// it and Wait reports the stuck blocks; 0 means 5 s.
	Timeout time.Duration
	// LLWidth is the LL packet width, 8 or 16 bytes; 0 means 16.
	LLWidth int
	// ProxyHandler serves the port channels' requests: on the cpu device
	// (RankComm.Open), and on the GPU with every rank in this process
	// (Open: port channels then go through the host proxy); nil is the
	// built-in copy and signal (docs/primitives.md, "Custom host
	// proxies").
	ProxyHandler ProxyHandler
}

// Comm runs one plan: all of its ranks, in this process, on device 0.
type Comm struct {
	ex *cudaexec.Executor
	ll int
}

// Open prepares every rank of p on the GPU.
func Open(p *Plan, opt Options) (*Comm, error) {
	co := cudaexec.Options{Timeout: opt.Timeout}
	if opt.ProxyHandler != nil {
		// A handler serves the host proxy's queue: port channels must go
		// through it rather than be copied by the kernel's threads.
		co.PortCopy, co.ProxyHandler = cudaexec.PortCopyProxy, opt.ProxyHandler
	}
	ex, err := cudaexec.Open(p, co)
	if err != nil {
		return nil, err
	}
	return &Comm{ex: ex, ll: opt.LLWidth}, nil
}

// Ranks is the plan's rank count.
func (c *Comm) Ranks() int { return c.ex.Ranks() }

// Alloc allocates zeroed buffers for a message of size bytes (as
// nccl-tests counts it) on every rank; in-place plans get aliased buffers.
// A size outside the plan's size rule runs through staging buffers of the
// next size the rule admits (copied in and out around each rank's
// kernel), so any size works that is a whole number of elements of the
// type Run is given, per rank's piece; Run refuses others.
func (c *Comm) Alloc(size int64) (*Buffers, error) { return c.ex.Alloc(size) }

// Wrap uses caller-owned device buffers, one input and output per rank.
func (c *Comm) Wrap(size int64, in, out []cuda.DevicePtr) (*Buffers, error) {
	return c.ex.Wrap(size, in, out)
}

// Run enqueues the collective on s (nil: the ranks' own streams). The first
// Run for a buffer set compiles the kernel and uploads the op tables; later
// ones only launch, and can be captured into a CUDA graph.
func (c *Comm) Run(b *Buffers, dt DType, red ReduceOp, s *Stream) error {
	return c.ex.Run(cudaexec.Call{Buffers: b, DType: dt, Reduce: red, LLWidth: c.ll, Stream: s})
}

// Wait blocks until the enqueued work is done and reports a hang the
// watchdog caught.
func (c *Comm) Wait(s *Stream) error { return c.ex.Wait(s) }

// Close releases the GPU resources (not buffers from Wrap).
func (c *Comm) Close() error { return c.ex.Close() }
