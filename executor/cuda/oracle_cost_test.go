package cudaexec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// fullConfigs is every configuration the GPU tests run: the non-NVLS peer
// fixtures and each library algorithm at 2, 3, 4, 6 and 8 ranks where it
// compiles (as TestGPUPeerPlans and TestGPUAlgorithms build them).
func fullConfigs(t testing.TB) map[string]*ir.Plan {
	cfg := map[string]*ir.Plan{}
	for _, f := range planFiles(t) {
		cfg[filepath.Base(f)] = loadPlan(t, f)
	}
	files, _ := filepath.Glob("../../algorithms/*.msccl")
	for _, f := range files {
		for _, n := range []int{2, 3, 4, 6, 8} {
			if p, err := compileAlgo(f, n); err == nil {
				cfg[fmt.Sprintf("%s@%d", strings.TrimSuffix(filepath.Base(f), ".msccl"), n)] = p
			}
		}
	}
	return cfg
}

// TestFullMatrixCoverage holds MSCCL_GPU_FULL's matrix to what
// scripts/gpu/full-matrix.sh promises: per configuration every size ×
// type × reduction at 10 launches plus the LL8 case. It logs the totals
// and the rank·launch bytes the CPU oracle simulates, from which the
// cost of a pass is estimated (BenchmarkOracleCPU gives the rate).
func TestFullMatrixCoverage(t *testing.T) {
	t.Setenv("MSCCL_GPU_FULL", "1")
	t.Setenv("MSCCL_GPU_QUICK", "")
	t.Setenv("MSCCL_GPU_DTYPES", "")
	types := []cpu.DType{cpu.F32, cpu.F16, cpu.BF16, cpu.I32, cpu.F8E4M3, cpu.F8E5M2}
	var cases int
	var simBytes, busBytes float64
	cfgs := fullConfigs(t)
	for name, p := range cfgs {
		cs := matrix(p)
		reds := 1
		if reduces(p) {
			reds = 3
		}
		type key struct {
			dt  cpu.DType
			red ir.ReduceOp
		}
		sizes := map[key]int{}
		ll8 := 0
		for _, c := range cs {
			if c.ll == 8 {
				ll8++
				continue
			}
			if c.launches != 10 || c.ll != 16 {
				t.Errorf("%s %v: want 10 launches at LL16", name, c)
			}
			sizes[key{c.dt, c.red}]++
			if in, out, err := p.BufferBytes(c.size); err == nil {
				n := float64(len(p.GPUs))
				simBytes += float64(c.launches) * n * float64(in+out)
				// Over PCIe: launch 0's inputs (the check of the built
				// ones) and every launch's eager outputs.
				busBytes += n*float64(in) + float64(c.launches)*n*float64(outBytes(p, in, out))
			}
		}
		if len(sizes) != len(types)*reds || ll8 != 1 {
			t.Errorf("%s: %d type×reduction pairs and %d LL8 cases, want %d and 1", name, len(sizes), ll8, len(types)*reds)
		}
		for k, n := range sizes {
			if n != 4 {
				t.Errorf("%s %s/%s: %d sizes, want 4", name, k.dt, k.red, n)
			}
		}
		cases += len(cs)
	}
	t.Logf("FULL matrix: %d configurations, %d cases, %.0f GiB of rank·launch input+output for the CPU oracle, %.0f GiB over PCIe", len(cfgs), cases, simBytes/(1<<30), busBytes/(1<<30))
}

// BenchmarkOracleCPU runs the CPU side of FULL-matrix cases at 64 MiB and
// 10 launches, the cases that hold 98% of the matrix's bytes, with the
// host work the GPU test adds (staging launch 0's inputs, comparing one
// output set a launch), and reports the rank·launch input+output bytes
// per second: with TestFullMatrixCoverage's total it estimates a pass's
// CPU time (MSCCL_BENCH_NOPOOL=1 runs without cpu.Buffers).
func BenchmarkOracleCPU(b *testing.B) {
	for _, bc := range []struct {
		algo string
		n    int
		dt   cpu.DType
		red  ir.ReduceOp
	}{
		{"allreduce_twoshot", 8, cpu.F32, ir.ReduceSum},
		{"allreduce_ring", 8, cpu.BF16, ir.ReduceMax},
		{"reducescatter_ring", 4, cpu.F8E4M3, ir.ReduceSum},
		{"allgather_ring", 8, cpu.F16, ir.ReduceSum},
		{"allreduce_twoshot", 4, cpu.F16, ir.ReduceMin},
		{"allreduce_twoshot", 4, cpu.F8E5M2, ir.ReduceMax},
	} {
		b.Run(fmt.Sprintf("%s@%d/%s/%s", bc.algo, bc.n, bc.dt, bc.red), func(b *testing.B) {
			p, err := compileAlgo("../../algorithms/"+bc.algo+".msccl", bc.n)
			if err != nil {
				b.Fatal(err)
			}
			benchOracleCase(b, p, gcase{size: 64 << 20, dt: bc.dt, red: bc.red, launches: 10, ll: 16})
		})
	}
}

func benchOracleCase(b *testing.B, p *ir.Plan, c gcase) {
	in, out, err := p.BufferBytes(c.size)
	if err != nil {
		b.Fatal(err)
	}
	n := int64(len(p.GPUs))
	outN := outBytes(p, in, out)
	stage := make([]byte, n*(in+outN))
	var pool *cpu.Buffers
	if os.Getenv("MSCCL_BENCH_NOPOOL") == "" {
		pool = cpu.NewBuffers(16 << 30)
	}
	b.ResetTimer()
	for range b.N {
		_, err := cpu.Run(p, cpu.Options{Size: c.size, DType: c.dt, Reduce: c.red, Launches: c.launches, LLWidth: c.ll, Buffers: pool, OnLaunchInputs: 1,
			OnLaunch: func(l int, ins, outs [][]byte) error {
				for r := range ins {
					if l == 0 {
						copy(stage[int64(r)*in:], ins[r])
					}
					got := stage[n*in+int64(r)*outN:][:outN]
					if !bytes.Equal(got, outs[r]) {
						copy(got, outs[r]) // stands in for the GPU's output
					}
				}
				return nil
			}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(c.launches)*float64(n)*float64(in+out)/(1<<30)/b.Elapsed().Seconds(), "GiB/s")
}
