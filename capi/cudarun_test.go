package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// fakeGPU stands in for a GPU in runCUDA's tests: device addresses are
// numbers in a made-up address space backed by Go slices, copies happen
// when queued (one stream: queue order is execution order), and the
// capture state of each stream is the test's to set. The real device is
// tested on the H200 (scripts/gpu/torchrun.sh).
type fakeGPU struct {
	mem     map[uint64][]byte
	next    uint64
	status  map[uintptr]int
	copies  int
	opens   int
	prepare int
	launch  int
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

func (g *fakeGPU) CaptureStatus(s uintptr) (int, error) {
	if s == 99 {
		return 0, fmt.Errorf("cuStreamIsCapturing: invalid resource handle")
	}
	return g.status[s], nil
}

func (g *fakeGPU) Copy(dst, src uint64, n int64, s uintptr) error {
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

func (g *fakeGPU) Open(ctx context.Context, p *ir.Plan, size int64) (cudaExec, error) {
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
	p                *ir.Plan
	in, out          uint64
	inN, outN        int64
	closed, prepared bool
}

func (e *fakeExec) Input() uint64   { return e.in }
func (e *fakeExec) Output() uint64  { return e.out }
func (e *fakeExec) InBytes() int64  { return e.inN }
func (e *fakeExec) OutBytes() int64 { return e.outN }
func (e *fakeExec) Close() error    { e.closed = true; return nil }

func (e *fakeExec) Prepare(dt ir.DType, red ir.ReduceOp) error {
	e.g.prepare++
	e.prepared = true
	return nil
}

func (e *fakeExec) Enqueue(dt ir.DType, red ir.ReduceOp, s uintptr) error {
	if !e.prepared || dt != ir.I32 || red != ir.ReduceSum {
		return fmt.Errorf("fake: launch of %s/%s unprepared or not i32 sum", dt, red)
	}
	e.g.launch++
	in, _ := e.g.at(e.in, e.inN)
	out, _ := e.g.at(e.out, e.outN)
	const n = 4
	get := func(b []byte, i int64) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }
	set := func(b []byte, i int64, v int32) { binary.LittleEndian.PutUint32(b[4*i:], uint32(v)) }
	switch e.p.Collective {
	case ir.AllReduce:
		for i := int64(0); i < e.outN/4; i++ {
			set(out, i, n*get(in, i))
		}
	case ir.AllGather:
		for q := int64(0); q < n; q++ {
			copy(out[q*e.inN:], in)
		}
	case ir.ReduceScatter:
		for i := int64(0); i < e.outN/4; i++ {
			set(out, i, n*get(in, i))
		}
	case ir.AllToAll:
		for q := int64(0); q < n; q++ {
			copy(out[q*e.outN/n:(q+1)*e.outN/n], in[:e.inN/n])
		}
	}
	return nil
}

func compileFile(t *testing.T, name string) int64 {
	t.Helper()
	path := "../algorithms/" + name + ".msccl"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, ds, err := compileSource(path, src, `{"ranks": 4}`)
	if err != nil {
		t.Fatalf("compile %s: %v (%v)", name, err, ds)
	}
	t.Cleanup(func() { table.release(h) })
	return h
}

// TestCUDAStaging runs every collective at awkward sizes through the cuda
// branch of commRun on the fake GPU: the caller's pieces land in the
// registered buffers padded, the results come back without a pad byte,
// an unpadded size is one copy each way, and capture takes only prepared
// runs and queues no allocation.
func TestCUDAStaging(t *testing.T) {
	g := newFakeGPU()
	c := &commEntry{device: "cuda", cuda: &cudaState{dev: g, execs: map[execKey]*cudaEntry{}}}
	const world = 4
	for _, tc := range []struct {
		algo    string
		inMul   int64 // caller's input elements per n
		outMul  int64
		want    func(in []int32, i int64) int32
		msgOfIn bool
	}{
		{"allreduce_ring", 1, 1, func(in []int32, i int64) int32 { return world * in[i] }, true},
		{"allgather_ring", 1, world, func(in []int32, i int64) int32 { return in[i%int64(len(in))] }, false},
		{"reducescatter_ring", world, 1, func(in []int32, i int64) int32 { return world * in[i] }, true},
		{"alltoall_direct", world, world, func(in []int32, i int64) int32 { return in[i%(int64(len(in))/world)] }, true},
	} {
		pe, err := table.plan(compileFile(t, tc.algo))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{1, 1000, 1003, 1024} {
			inB, outB := 4*n*tc.inMul, 4*n*tc.outMul
			cl, err := resolve(world, pe, inB, outB, "i32", "sum")
			if err != nil {
				t.Fatalf("%s n=%d: %v", tc.algo, n, err)
			}
			in, out := g.alloc(inB), g.alloc(outB)
			ib, _ := g.at(in, inB)
			vals := make([]int32, inB/4)
			for i := range vals {
				vals[i] = int32(i%9973 + 1)
				binary.LittleEndian.PutUint32(ib[4*i:], uint32(vals[i]))
			}
			copies := g.copies
			if err := c.runCUDA(cl, in, out, 7); err != nil {
				t.Fatalf("%s n=%d: %v", tc.algo, n, err)
			}
			ob, _ := g.at(out, outB)
			for i := int64(0); i < outB/4; i++ {
				if got, want := int32(binary.LittleEndian.Uint32(ob[4*i:])), tc.want(vals, i); got != want {
					t.Fatalf("%s n=%d (runs at %d bytes): element %d is %d (%#x), want %d", tc.algo, n, cl.key.size, i, got, uint32(got), want)
				}
			}
			if msg := messageSize(cl.p, inB, outB); msg == cl.key.size && g.copies-copies != 2 {
				t.Errorf("%s n=%d: an unpadded size took %d copies, want one each way", tc.algo, n, g.copies-copies)
			}
			// The same call under capture: prepared, so it is queued
			// with nothing opened or prepared.
			g.status[8] = cuda.CaptureActive
			opens, preps, launches := g.opens, g.prepare, g.launch
			if err := c.runCUDA(cl, in, out, 8); err != nil {
				t.Fatalf("%s n=%d under capture: %v", tc.algo, n, err)
			}
			if g.opens != opens || g.prepare != preps || g.launch != launches+1 {
				t.Errorf("%s n=%d under capture: opens %d->%d, prepares %d->%d, launches %d->%d", tc.algo, n, opens, g.opens, preps, g.prepare, launches, g.launch)
			}
		}
	}

	// An unprepared size under capture is refused before anything is
	// queued; prepare, then the capture takes it.
	pe, _ := table.plan(compileFile(t, "allreduce_ring"))
	cl, err := resolve(world, pe, 4*5000, 4*5000, "i32", "sum")
	if err != nil {
		t.Fatal(err)
	}
	buf := g.alloc(4 * 5000)
	copies, opens := g.copies, g.opens
	err = c.runCUDA(cl, buf, buf, 8)
	if err == nil || !strings.Contains(err.Error(), "not prepared") || !strings.Contains(err.Error(), "prepare") {
		t.Errorf("unprepared under capture: %v", err)
	}
	if g.copies != copies || g.opens != opens {
		t.Errorf("the refused capture queued %d copies and opened %d plans", g.copies-copies, g.opens-opens)
	}
	c.mu.Lock()
	_, err = c.entry(cl, false)
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.runCUDA(cl, buf, buf, 8); err != nil {
		t.Errorf("prepared, under capture: %v", err)
	}

	// Other types of the same plan and size are prepared separately.
	cl16, _ := resolve(world, pe, 4*5000, 4*5000, "f32", "sum")
	if err := c.runCUDA(cl16, buf, buf, 8); err == nil || !strings.Contains(err.Error(), "f32/sum is not prepared") {
		t.Errorf("another type under capture: %v", err)
	}

	for _, tc := range []struct {
		stream uintptr
		status int
		want   string
	}{
		{9, cuda.CaptureInvalidated, "capture was invalidated"},
		{99, 0, "invalid resource handle"},
	} {
		g.status[tc.stream] = tc.status
		err := c.runCUDA(cl, buf, buf, tc.stream)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("stream %d: %v, want %q", tc.stream, err, tc.want)
		}
	}

	es := c.cuda.execs
	errs := c.cuda.close()
	if len(errs) > 0 {
		t.Error(errs)
	}
	for k, x := range es {
		if !x.ex.(*fakeExec).closed {
			t.Errorf("%v not closed", k)
		}
	}
}

// Device names reach msccl.OpenComm as the cuda device with its ordinal;
// without a driver the refusal names the device.
func TestOpenCUDAWithoutDriver(t *testing.T) {
	if _, _, err := parseDevice("cuda:x"); err == nil {
		t.Error("cuda:x accepted")
	}
	if n, o, err := parseDevice("cuda:3"); n != "cuda" || o != "3" || err != nil {
		t.Errorf("cuda:3: %q %q %v", n, o, err)
	}
	if n, _, _ := parseDevice("gpu:0"); n != "gpu:0" {
		t.Errorf("gpu:0 became %q; msccl should judge it whole", n)
	}
	if cuda.Init() == nil {
		t.Skip("a CUDA driver loads here: the refusal is for machines without one")
	}
	t.Setenv("MSCCL_RANK", "")
	t.Setenv("RANK", "")
	if _, err := openComm("cuda:0", "", 0, 0); err == nil || !strings.Contains(err.Error(), `device "cuda"`) {
		t.Errorf("cuda without a driver: %v", err)
	}
}
