package cudaexec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
)

// needGPU skips unless a CUDA driver, a device and NVRTC are present.
func needGPU(t *testing.T) {
	t.Helper()
	if err := cuda.Init(); err != nil {
		if errors.Is(err, cuda.ErrNoDriver) {
			t.Skipf("no CUDA driver or device: %v", err)
		}
		t.Fatal(err)
	}
	if _, _, err := nvrtc.Version(); err != nil {
		t.Skipf("NVRTC not available: %v", err)
	}
}

func loadPlan(t testing.TB, path string) *ir.Plan {
	t.Helper()
	p, _, err := ir.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// openAlloc opens p and allocates size bytes per rank. done frees the
// buffers and then closes the executor (the order a deferred pair would
// run in); callers defer it inside their gpuMu section, so the device is
// released before the next test takes the lock.
func openAlloc(t testing.TB, p *ir.Plan, opt Options, size int64) (*Executor, *Buffers, func()) {
	t.Helper()
	e, err := Open(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Alloc(size)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	return e, b, func() { b.Free(); e.Close() }
}

// planFiles lists the non-switch peer fixtures.
func planFiles(t testing.TB) []string {
	files, err := filepath.Glob("../../testdata/peer-plans/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []string
	for _, f := range files {
		if !strings.Contains(f, "nvls") {
			out = append(out, f)
		}
	}
	return out
}

func reduces(p *ir.Plan) bool {
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			var walk func([]ir.Op) bool
			walk = func(ops []ir.Op) bool {
				for i := range ops {
					if ops[i].Info().Reduces || walk(ops[i].Ops()) {
						return true
					}
				}
				return false
			}
			if walk(tb.Ops) {
				return true
			}
		}
	}
	return false
}

func TestGPUPeerPlans(t *testing.T) {
	needGPU(t)
	for _, f := range planFiles(t) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := loadPlan(t, f)
			checkCases(t, name, p, matrix(p))
		})
	}
}

func TestGPURefusesMulticast(t *testing.T) {
	needGPU(t)
	p := loadPlan(t, "../../testdata/peer-plans/reduce_nvls.json")
	_, err := Open(p, Options{})
	if err == nil || !strings.Contains(err.Error(), "multicast") {
		t.Fatalf("want a multicast refusal, got %v", err)
	}
}

// TestGPUWatchdog drops rank 0's first signal: rank 1 waits forever, and the
// watchdog must name it within the timeout.
func TestGPUWatchdog(t *testing.T) {
	needGPU(t)
	p := loadPlan(t, "../../testdata/peer-plans/allreduce.json")
	dropped := false
	for bi := range p.GPUs[0].ThreadBlocks {
		tb := &p.GPUs[0].ThreadBlocks[bi]
		for k := range tb.Ops {
			if tb.Ops[k].Code == ir.OpSignal {
				tb.Ops = append(tb.Ops[:k], tb.Ops[k+1:]...)
				dropped = true
				break
			}
		}
		if dropped {
			break
		}
	}
	if !dropped {
		t.Fatal("fixture has no signal to drop")
	}
	gpuMu.Lock()
	defer gpuMu.Unlock()
	e, bufs, done := openAlloc(t, p, Options{Timeout: time.Second}, 1<<20)
	defer done()
	st := time.Now()
	if err := e.Run(Call{Buffers: bufs, DType: ir.F32}); err != nil {
		t.Fatal(err)
	}
	err := e.Wait(nil)
	d := time.Since(st)
	var h *HangError
	if !errors.As(err, &h) {
		t.Fatalf("want a watchdog error, got %v", err)
	}
	t.Logf("after %v: %v", d, err)
	if d > 10*time.Second {
		t.Errorf("watchdog took %v, timeout was 1s", d)
	}
	found := false
	for _, w := range h.Stuck {
		if w.Rank == 1 && w.Kind == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no stuck signal wait on rank 1 in %v", err)
	}
	if err := e.Run(Call{Buffers: bufs, DType: ir.F32}); err == nil {
		t.Error("executor accepted a run after a hang")
	}
}

// compileAlgo compiles algorithms/NAME.msccl for n ranks.
func compileAlgo(path string, n int) (*ir.Plan, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	defs := map[string]int64{"ranks": int64(n)}
	if bytes.Contains(src, []byte("param gpus_per_node")) {
		// Hierarchical: two "nodes" of n/2 ranks each (all on one GPU here).
		defs["nodes"], defs["gpus_per_node"] = 2, int64(n/2)
	}
	return compileWith(path, defs)
}

func compileWith(path string, defs map[string]int64) (*ir.Plan, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _, ds := compiler.CompileSource(path, src, defs, compiler.Options{})
	if ds.HasErrors() {
		return nil, fmt.Errorf("%s", ds.String())
	}
	return p, nil
}

func TestGPUAlgorithms(t *testing.T) {
	needGPU(t)
	files, _ := filepath.Glob("../../algorithms/*.msccl")
	if len(files) == 0 {
		t.Skip("no library algorithms yet")
	}
	for _, f := range files {
		for _, n := range []int{2, 3, 4, 6, 8} {
			name := fmt.Sprintf("%s@%d", strings.TrimSuffix(filepath.Base(f), ".msccl"), n)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p, err := compileAlgo(f, n)
				if err != nil {
					t.Skipf("does not compile for %d ranks: %v", n, err)
				}
				checkCases(t, name, p, matrix(p))
			})
		}
	}
}
