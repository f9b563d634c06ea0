package cudaexec

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// GPU tests of Options.Devices (devices.go). They skip without a driver;
// the spread one also with fewer than two visible GPUs.

// devicesAlgos are the library algorithms the placement tests run: memory
// channels (twoshot, ring), all pairs (direct) and port channels
// (hierarchical).
var devicesAlgos = []string{"allreduce_twoshot", "allgather_ring", "alltoall_direct", "allreduce_hierarchical"}

// devicesCases is a short matrix: f32 sum and bf16 min (max for plans that
// do not reduce: sum is their only op) at 1 MiB and at an uneven size, and
// an LL8 case.
func devicesCases(p *ir.Plan) []gcase {
	var cs []gcase
	for _, c := range matrix(p) {
		if c.size <= 1<<20 && (c.ll == 8 || c.dt == cpu.F32 && c.red == ir.ReduceSum || c.dt == cpu.BF16 && c.red == ir.ReduceMin) {
			c.launches = min(c.launches, 3)
			cs = append(cs, c)
		}
	}
	return cs
}

// devicesPlan compiles a library algorithm for n ranks, skipping when it
// does not compile for that count.
func devicesPlan(t *testing.T, algo string, n int) *ir.Plan {
	t.Helper()
	p, err := compileAlgo(filepath.Join("../../algorithms", algo+".msccl"), n)
	if err != nil {
		t.Skipf("%s does not compile for %d ranks: %v", algo, n, err)
	}
	return p
}

// TestGPUDevicesExplicitOne puts every rank on device 0 through the
// placement path (Devices set to all zeros: each rank's driver calls in
// Context.Do, kernels loaded per device) and runs the oracle harness,
// eager and graph, bit for bit against the CPU executor.
func TestGPUDevicesExplicitOne(t *testing.T) {
	needGPU(t)
	const n = 4
	for _, algo := range devicesAlgos {
		t.Run(algo, func(t *testing.T) {
			p := devicesPlan(t, algo, n)
			checkCasesWith(t, algo, p, devicesCases(p), Options{Timeout: 3 * time.Second, Devices: make([]int, n)})
		})
	}
	// The path taken was the placement's: each rank has its context and
	// the kernel was loaded for device 0 through it, not into e.fns.
	p := devicesPlan(t, "allreduce_twoshot", n)
	gpuMu.Lock()
	defer gpuMu.Unlock()
	e, b, done := openAlloc(t, p, Options{Timeout: 3 * time.Second, Devices: make([]int, n)}, 1<<20)
	defer done()
	if err := e.Run(Call{Buffers: b, DType: ir.F32, Reduce: ir.ReduceSum}); err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(nil); err != nil {
		t.Fatal(err)
	}
	for r, rs := range e.ranks {
		if rs.ctx == nil {
			t.Errorf("rank %d has no context of its own", r)
		}
	}
	if len(e.fns) != 0 || len(e.devs.fns[0]) != 1 || e.spread() || len(e.PeerAccess()) != 0 {
		t.Errorf("default kernels %d, device 0's %d, spread %v, peers %v: want 0, 1, false, none", len(e.fns), len(e.devs.fns[0]), e.spread(), e.PeerAccess())
	}
}

// TestGPUDevicesSpread places 4 ranks round-robin on the visible GPUs
// (up to 4) and compares every launch with the CPU executor, eager only
// (graphs stay on one device). Pairs without peer access must be refused
// with exec.unsupported rather than run.
func TestGPUDevicesSpread(t *testing.T) {
	needGPU(t)
	count, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if count < 2 {
		t.Skipf("%d GPU visible: placing ranks on distinct devices needs 2", count)
	}
	const n = 4
	devs := make([]int, n)
	for r := range devs {
		devs[r] = r % min(count, n)
	}
	for _, algo := range devicesAlgos {
		t.Run(algo, func(t *testing.T) {
			p := devicesPlan(t, algo, n)
			eagerOracle(t, p, Options{Timeout: 3 * time.Second, Devices: devs}, devicesCases(p))
		})
	}
}

// eagerOracle runs each case on an executor opened with opt, launch by
// launch with the CPU executor's inputs, and compares every rank's output
// with the CPU's bit for bit. Copies to and from a rank's buffers run in
// the rank's context.
func eagerOracle(t *testing.T, p *ir.Plan, opt Options, cases []gcase) {
	gpuMu.Lock()
	defer gpuMu.Unlock()
	e, err := Open(p, opt)
	if ir.ErrorCode(err) == ir.CodeUnsupported {
		t.Skipf("refused: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	t.Logf("devices %v, peers %s", e.Devices(), FormatPeers(e.PeerAccess()))
	if e.spread() {
		// Refused before the stream is looked at.
		if _, err := e.Capture(Call{Stream: &cuda.Stream{}}); ir.ErrorCode(err) != ir.CodeUnsupported {
			t.Errorf("Capture with ranks on several devices: %v, want exec.unsupported", err)
		}
	}
	for _, c := range cases {
		in, out, err := p.BufferBytes(c.size)
		if err != nil {
			t.Logf("%v: skipped, %v", c, err)
			continue
		}
		outN := outBytes(p, in, out)
		b, err := e.Alloc(c.size)
		if err != nil {
			t.Fatal(err)
		}
		call := Call{Buffers: b, DType: c.dt, Reduce: c.red, LLWidth: c.ll}
		launch := func(l int, inputs, outputs [][]byte) error {
			for r, rs := range e.ranks {
				if err := rs.do(func() error { return cuda.MemcpyHtoD(b.In[r], inputs[r]) }); err != nil {
					return err
				}
			}
			if err := e.Run(call); err != nil {
				return err
			}
			if err := e.Wait(nil); err != nil {
				return err
			}
			for r, rs := range e.ranks {
				got := make([]byte, outN)
				if err := rs.do(func() error { return cuda.MemcpyDtoH(got, b.Out[r]) }); err != nil {
					return err
				}
				if !bytes.Equal(got, outputs[r]) {
					return fmt.Errorf("launch %d rank %d (device %d): output differs from the CPU executor (%s)", l, r, e.devs.of[r], diffWords(got, outputs[r]))
				}
			}
			return nil
		}
		rep, err := cpu.Run(p, cpu.Options{Size: c.size, DType: c.dt, Seed: oracleSeed, Reduce: c.red, Launches: c.launches, LLWidth: c.ll, OnLaunch: launch})
		switch {
		case err != nil:
			t.Errorf("%v: %v", c, err)
		case !rep.OK():
			t.Logf("%v: skipped, the CPU executor's verdict is %s", c, rep.Verdict)
		}
		e.Release(b)
		b.Free()
	}
}
