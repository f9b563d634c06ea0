package cudaexec

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

func TestResidentError(t *testing.T) {
	if err := residentError("p", 0, 8, 132, 1024, 4096, 1, 132); err != nil {
		t.Errorf("132 blocks fit 132 SMs: %v", err)
	}
	err := residentError("alltoall_ring", 0, 8, 256, 1024, 4096, 1, 132)
	if err == nil || !strings.Contains(err.Error(), "needs all 256 thread blocks of its 8 ranks resident at once") ||
		!strings.Contains(err.Error(), "at most 132 blocks of 1024 threads") {
		t.Fatalf("got %v", err)
	}
}

// openAlgo compiles library algorithm algo with defs, opens it and
// allocates buffers for size bytes, holding gpuMu until the test ends.
func openAlgo(t *testing.T, algo string, defs map[string]int64, size int64) (*Executor, *Buffers) {
	t.Helper()
	p, err := compileWith(filepath.Join("../../algorithms", algo+".msccl"), defs)
	if err != nil {
		t.Fatal(err)
	}
	gpuMu.Lock()
	t.Cleanup(gpuMu.Unlock)
	e, b, done := openAlloc(t, p, Options{}, size)
	t.Cleanup(done)
	return e, b
}

// TestGPURefusesNonResident compiles a plan with more blocks than the GPU
// holds at once (8 ranks × 8 instances of all-gather's 8 blocks, 1024
// threads each) and expects a refusal before anything launches, not a
// watchdog hang.
func TestGPURefusesNonResident(t *testing.T) {
	needGPU(t)
	e, b := openAlgo(t, "allgather_direct", map[string]int64{"ranks": 8, "instances": 16}, 1<<20)
	err := e.Run(Call{Buffers: b, DType: ir.F32})
	if ir.ErrorCode(err) != ir.CodeNotResident {
		t.Fatalf("got %v, want a co-residency refusal", err)
	}
	t.Log(err)
}

// TestGPUStagedSizes runs sizes outside the plans' rules (a float, 1001
// floats, 1001 halves, per-rank pieces of three floats) through staging
// buffers and checks every result element against a host reference; a
// size that is not whole elements of the call's type is refused.
func TestGPUStagedSizes(t *testing.T) {
	needGPU(t)
	const n = 8
	for _, c := range []struct {
		algo string
		size int64
		dt   ir.DType
	}{
		{"allreduce_allpairs_packet", 4, ir.F32},
		{"allreduce_allpairs_packet", 4004, ir.F32},
		{"allreduce_twoshot", 4004, ir.F32},
		{"allreduce_ring", 2002, ir.F16},
		{"allgather_direct", n * 12, ir.F32},
		{"reducescatter_direct", n * 12, ir.F32},
		{"alltoall_direct", n * 8, ir.F32},
	} {
		t.Run(fmt.Sprintf("%s/%d/%s", c.algo, c.size, c.dt), func(t *testing.T) {
			e, b := openAlgo(t, c.algo, map[string]int64{"ranks": n}, c.size)
			p := e.p
			if b.stage == nil {
				t.Fatalf("size %d is in the rule (%s); the test wants a staged size", c.size, e.rule)
			}
			es := int64(c.dt.Size())
			ins := make([][]float64, n)
			for r := range n {
				k := b.InBytes / es
				ins[r] = make([]float64, k)
				raw := make([]byte, b.InBytes)
				for i := range k {
					v := float64((int64(r)*7+i*3)%11 - 5)
					ins[r][i] = v
					putElem(raw[i*es:], c.dt, v)
				}
				if err := cuda.MemcpyHtoD(b.In[r], raw); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Run(Call{Buffers: b, DType: c.dt}); err != nil {
				t.Fatal(err)
			}
			if err := e.Wait(nil); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for r := range n {
				raw := make([]byte, b.OutBytes)
				if err := cuda.MemcpyDtoH(raw, b.Out[r]); err != nil {
					t.Fatal(err)
				}
				k := b.OutBytes / es
				for i := range k {
					want := expectedElem(p.Collective, ins, r, i, k)
					if got := getElem(raw[i*es:], c.dt); got != want {
						if bad < 5 {
							t.Errorf("rank %d element %d: got %v, want %v", r, i, got, want)
						}
						bad++
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d wrong elements", bad)
			}
		})
	}
	t.Run("not whole elements", func(t *testing.T) {
		e, b := openAlgo(t, "allreduce_allpairs_packet", map[string]int64{"ranks": n}, 4002)
		if err := e.Run(Call{Buffers: b, DType: ir.F32}); err == nil || !strings.Contains(err.Error(), "not a whole number of f32 elements") {
			t.Fatalf("got %v", err)
		}
	})
}

// expectedElem is element i of rank r's output (k elements) by the
// collective's definition over integer-valued inputs (exact in every
// type used here).
func expectedElem(col ir.Collective, ins [][]float64, r int, i, k int64) float64 {
	n := int64(len(ins))
	switch col {
	case ir.AllReduce:
		s := 0.0
		for q := range ins {
			s += ins[q][i]
		}
		return s
	case ir.AllGather:
		per := k / n
		return ins[i/per][i%per]
	case ir.ReduceScatter:
		s := 0.0
		for q := range ins {
			s += ins[q][int64(r)*k+i]
		}
		return s
	case ir.AllToAll:
		per := k / n
		return ins[i/per][int64(r)*per+i%per]
	}
	return math.NaN()
}

func putElem(b []byte, dt ir.DType, v float64) {
	switch dt {
	case ir.F32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case ir.F16:
		binary.LittleEndian.PutUint16(b, f16bits(float32(v)))
	}
}

func getElem(b []byte, dt ir.DType) float64 {
	switch dt {
	case ir.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case ir.F16:
		return float64(f16value(binary.LittleEndian.Uint16(b)))
	}
	return math.NaN()
}

// f16bits and f16value convert small integers exactly (|v| < 2048).
func f16bits(f float32) uint16 {
	if f == 0 {
		return 0
	}
	sign := uint16(0)
	if f < 0 {
		sign, f = 0x8000, -f
	}
	e := 0
	for f >= 2 {
		f, e = f/2, e+1
	}
	return sign | uint16(e+15)<<10 | uint16((f-1)*1024)
}

func f16value(h uint16) float32 {
	if h&0x7fff == 0 {
		return 0
	}
	e := int(h>>10&0x1f) - 15
	v := (1 + float32(h&0x3ff)/1024) * float32(math.Pow(2, float64(e)))
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func TestF16Helpers(t *testing.T) {
	for v := -64; v <= 64; v++ {
		if got := f16value(f16bits(float32(v))); got != float32(v) {
			t.Fatalf("%d -> %#04x -> %v", v, f16bits(float32(v)), got)
		}
	}
	if f16bits(1) != 0x3c00 || f16bits(-2) != 0xc000 {
		t.Fatalf("1 -> %#04x, -2 -> %#04x", f16bits(1), f16bits(-2))
	}
}
