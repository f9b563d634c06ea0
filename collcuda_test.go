package msccl

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// fakeGPU stands in for a GPU in the cuda device's staging tests: device
// addresses are numbers in a made-up address space backed by Go slices,
// copies happen when queued (one stream: queue order is execution
// order), and the capture state of each stream is the test's to set. The
// real device runs on the GPU machine (scripts/gpu/torchrun.sh).
type fakeGPU struct {
	mem     map[uint64][]byte
	next    uint64
	status  map[uintptr]int
	copies  int // copy-engine copies
	opens   int
	prepare int
	launch  int
	// kin, kout are what its executors' kernels stage (kernelStage);
	// kcopies counts the copies they made.
	kin, kout bool
	kcopies   int
	atLaunch  int // copies when the last launch was queued
}

func newFakeGPU() *fakeGPU {
	return &fakeGPU{mem: map[uint64][]byte{}, next: 1 << 32, status: map[uintptr]int{}}
}

// alloc returns n bytes of poison (0xEE, what a pad must never leak).
func (g *fakeGPU) alloc(n int64) uint64 {
	base := g.next
	g.next += uint64(n) + 4096
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xEE
	}
	g.mem[base] = b
	return base
}

func (g *fakeGPU) at(addr uint64, n int64) ([]byte, error) {
	for base, b := range g.mem {
		if addr >= base && addr+uint64(n) <= base+uint64(len(b)) {
			return b[addr-base : addr-base+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("fake: %d bytes at %#x are not allocated", n, addr)
}

func (g *fakeGPU) captureStatus(s uintptr) (int, error) {
	if s == 99 {
		return 0, fmt.Errorf("cuStreamIsCapturing: invalid resource handle")
	}
	return g.status[s], nil
}

func (g *fakeGPU) copy(dst, src uint64, n int64, s uintptr) error {
	d, err := g.at(dst, n)
	if err != nil {
		return err
	}
	sb, err := g.at(src, n)
	if err != nil {
		return err
	}
	copy(d, sb)
	g.copies++
	return nil
}

func (g *fakeGPU) open(ctx context.Context, p *Plan, size int64) (gpuExec, error) {
	in, out, err := p.BufferBytes(size)
	if err != nil {
		return nil, err
	}
	g.opens++
	return &fakeExec{g: g, p: p, in: g.alloc(in), out: g.alloc(out), inN: in, outN: out}, nil
}

// fakeExec runs rank 0 of a 4-rank collective whose ranks all hold the
// same input, on i32 elements: what rank 0 would see.
type fakeExec struct {
	g                *fakeGPU
	p                *Plan
	in, out          uint64
	inN, outN        int64
	closed, prepared bool
}

func (e *fakeExec) input() uint64   { return e.in }
func (e *fakeExec) output() uint64  { return e.out }
func (e *fakeExec) inBytes() int64  { return e.inN }
func (e *fakeExec) outBytes() int64 { return e.outN }
func (e *fakeExec) close() error    { e.closed = true; return nil }

func (e *fakeExec) prepare(dt DType, red ReduceOp) error {
	e.g.prepare++
	e.prepared = true
	return nil
}

func (e *fakeExec) kernelStage() (bool, bool) { return e.g.kin, e.g.kout }

// stage makes a kernel's staging copies, refusing what a real kernel
// would not take.
func (e *fakeExec) stage(spans []cudaexec.Span, allowed bool) error {
	if len(spans) > 0 && !allowed || len(spans) > kernels.StageSpans {
		return fmt.Errorf("fake: the kernel was given %d spans (allowed: %v)", len(spans), allowed)
	}
	for _, x := range spans {
		if err := e.g.copy(x.Dst, x.Src, int64(x.N), 0); err != nil {
			return err
		}
		e.g.copies--
		e.g.kcopies++
	}
	return nil
}

func (e *fakeExec) enqueue(dt DType, red ReduceOp, s uintptr, st cudaexec.Staging) error {
	if !e.prepared || dt != ir.I32 || red != ir.ReduceSum {
		return fmt.Errorf("fake: launch of %s/%s unprepared or not i32 sum", dt, red)
	}
	e.g.launch++
	e.g.atLaunch = e.g.copies
	if err := e.stage(st.In, e.g.kin); err != nil {
		return err
	}
	defer e.stage(st.Out, e.g.kout)
	in, _ := e.g.at(e.in, e.inN)
	out, _ := e.g.at(e.out, e.outN)
	const n = 4
	get := func(b []byte, i int64) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }
	set := func(b []byte, i int64, v int32) { binary.LittleEndian.PutUint32(b[4*i:], uint32(v)) }
	switch e.p.Collective {
	case ir.AllReduce, ir.ReduceScatter:
		for i := int64(0); i < e.outN/4; i++ {
			set(out, i, n*get(in, i))
		}
	case ir.AllGather:
		for q := int64(0); q < n; q++ {
			copy(out[q*e.inN:], in)
		}
	case ir.AllToAll:
		for q := int64(0); q < n; q++ {
			copy(out[q*e.outN/n:(q+1)*e.outN/n], in[:e.inN/n])
		}
	}
	return nil
}

// TestCUDAStaging runs every collective at awkward sizes through the
// cuda device's branch on the fake GPU: the caller's pieces land in the
// registered buffers padded, the results come back without a pad byte,
// an unpadded size is one copy each way, and capture takes only
// prepared runs and queues no allocation.
//
// It runs once per staging: by copy-engine copies only (MSCCL_STAGE=copy),
// in the kernel for the output only (a plan whose peers read inputs), and
// in the kernel both ways.
func TestCUDAStaging(t *testing.T) {
	for _, mode := range []struct {
		name      string
		kin, kout bool
	}{{"copy", false, false}, {"kernel output", false, true}, {"kernel", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			g := newFakeGPU()
			g.kin, g.kout = mode.kin, mode.kout
			testCUDAStaging(t, g)
		})
	}
}

func testCUDAStaging(t *testing.T, g *fakeGPU) {
	s := newCollState(gpuDevice{g})
	ctx := context.Background()
	const world = 4
	do := func(cl Call) error { return s.do(ctx, world, 0, cl, false) }
	plans := map[string]*Plan{}
	for _, algo := range []string{"allreduce_ring", "allgather_ring", "reducescatter_ring", "alltoall_direct"} {
		p, err := CompileAlgorithm("", algo, map[string]int64{"ranks": world})
		if err != nil {
			t.Fatal(err)
		}
		plans[algo] = p
	}
	for _, tc := range []struct {
		algo   string
		inMul  int64 // caller's input elements per n
		outMul int64
		want   func(in []int32, i int64) int32
	}{
		{"allreduce_ring", 1, 1, func(in []int32, i int64) int32 { return world * in[i] }},
		{"allgather_ring", 1, world, func(in []int32, i int64) int32 { return in[i%int64(len(in))] }},
		{"reducescatter_ring", world, 1, func(in []int32, i int64) int32 { return world * in[i] }},
		{"alltoall_direct", world, world, func(in []int32, i int64) int32 { return in[i%(int64(len(in))/world)] }},
	} {
		p := plans[tc.algo]
		for _, n := range []int64{1, 1000, 1003, 1024} {
			inB, outB := 4*n*tc.inMul, 4*n*tc.outMul
			in, out := g.alloc(inB), g.alloc(outB)
			ib, _ := g.at(in, inB)
			vals := make([]int32, inB/4)
			for i := range vals {
				vals[i] = int32(i%9973 + 1)
				binary.LittleEndian.PutUint32(ib[4*i:], uint32(vals[i]))
			}
			cl := Call{Collective: p.Collective, In: DeviceMem(cuda.DevicePtr(in), inB), Out: DeviceMem(cuda.DevicePtr(out), outB), DType: I32, Plan: p, Stream: 7}
			copies, kcopies := g.copies, g.kcopies
			if err := do(cl); err != nil {
				t.Fatalf("%s n=%d: %v", tc.algo, n, err)
			}
			ob, _ := g.at(out, outB)
			for i := int64(0); i < outB/4; i++ {
				if got, want := int32(binary.LittleEndian.Uint32(ob[4*i:])), tc.want(vals, i); got != want {
					t.Fatalf("%s n=%d: element %d is %d (%#x), want %d", tc.algo, n, i, got, uint32(got), want)
				}
			}
			msg := p.Collective.MessageSize(inB, outB)
			engine, kernel := g.copies-copies, g.kcopies-kcopies
			if rule, _ := p.SizeRule(); rule.Admits(msg) {
				want := map[bool]int{true: 0, false: 1}
				if engine+kernel != 2 || engine != want[g.kin]+want[g.kout] {
					t.Errorf("%s n=%d: an unpadded size took %d copy-engine and %d kernel copies, want one each way (kernel: input %v, output %v)", tc.algo, n, engine, kernel, g.kin, g.kout)
				}
			}
			// What the kernel may stage it stages, unless there are more
			// spans than its parameter holds.
			engineIn, engineOut := g.atLaunch-copies, g.copies-g.atLaunch
			if g.kin && engineIn > 0 && engineIn <= kernels.StageSpans || g.kout && engineOut > 0 && engineOut <= kernels.StageSpans {
				t.Errorf("%s n=%d: %d input and %d output spans copied by the copy engine, which the kernel could have staged (input %v, output %v)", tc.algo, n, engineIn, engineOut, g.kin, g.kout)
			}
			// The same call under capture: prepared, so it is queued
			// with nothing opened or prepared.
			g.status[8] = cuda.CaptureActive
			opens, preps, launches := g.opens, g.prepare, g.launch
			cl.Stream = 8
			if err := do(cl); err != nil {
				t.Fatalf("%s n=%d under capture: %v", tc.algo, n, err)
			}
			if g.opens != opens || g.prepare != preps || g.launch != launches+1 {
				t.Errorf("%s n=%d under capture: opens %d->%d, prepares %d->%d, launches %d->%d", tc.algo, n, opens, g.opens, preps, g.prepare, launches, g.launch)
			}
		}
	}

	// An unprepared size under capture is refused before anything is
	// queued; Prepare, then the capture takes it.
	buf := DeviceMem(cuda.DevicePtr(g.alloc(4*5000)), 4*5000)
	cl := Call{Collective: ir.AllReduce, In: buf, Out: buf, DType: I32, Plan: plans["allreduce_ring"], Stream: 8}
	copies, opens := g.copies, g.opens
	if err := do(cl); err == nil || !strings.Contains(err.Error(), "not prepared") || !strings.Contains(err.Error(), "Prepare") {
		t.Errorf("unprepared under capture: %v", err)
	}
	if g.copies != copies || g.opens != opens {
		t.Errorf("the refused capture queued %d copies and opened %d plans", g.copies-copies, g.opens-opens)
	}
	if err := s.do(ctx, world, 0, Call{Collective: ir.AllReduce, In: buf, Out: buf, DType: I32, Plan: plans["allreduce_ring"]}, true); err != nil {
		t.Fatal(err)
	}
	if err := do(cl); err != nil {
		t.Errorf("prepared, under capture: %v", err)
	}
	// Other types of the same plan and size are prepared separately.
	cl.DType = F32
	if err := do(cl); err == nil || !strings.Contains(err.Error(), "f32/sum is not prepared") {
		t.Errorf("another type under capture: %v", err)
	}
	cl.DType = I32
	for _, tc := range []struct {
		stream uintptr
		status int
		want   string
	}{
		{9, cuda.CaptureInvalidated, "capture was invalidated"},
		{99, 0, "invalid resource handle"},
	} {
		g.status[tc.stream] = tc.status
		cl.Stream = tc.stream
		if err := do(cl); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("stream %d: %v, want %q", tc.stream, err, tc.want)
		}
	}
	// Host memory on the cuda device is refused.
	if err := do(Call{Collective: ir.AllReduce, In: HostMem(make([]byte, 8)), Out: HostMem(make([]byte, 8)), DType: I32}); err == nil || !strings.Contains(err.Error(), "host memory on the cuda device") {
		t.Errorf("host memory: %v", err)
	}

	es := s.execs
	if err := s.close(); err != nil {
		t.Error(err)
	}
	for k, x := range es {
		if !x.(gpuColl).x.(*fakeExec).closed {
			t.Errorf("%v not closed", k)
		}
	}
	if err := do(cl); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after close: %v", err)
	}
}

// TestStageMode: MSCCL_STAGE picks the cuda device's staging, unset is
// the default constant, and a misspelling is an error naming both values.
func TestStageMode(t *testing.T) {
	for _, tc := range []struct {
		env    string
		kernel bool
		err    string
	}{{"", stageInKernel, ""}, {"kernel", true, ""}, {"copy", false, ""}, {"memcpy", false, `MSCCL_STAGE="memcpy": want kernel`}} {
		t.Setenv("MSCCL_STAGE", tc.env)
		kernel, err := stageMode()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "copy") {
				t.Errorf("MSCCL_STAGE=%q: %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || kernel != tc.kernel {
			t.Errorf("MSCCL_STAGE=%q: kernel %v, %v; want %v", tc.env, kernel, err, tc.kernel)
		}
	}
}
