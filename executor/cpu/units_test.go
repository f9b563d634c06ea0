package cpu

import (
	"encoding/binary"

	"encoding/json"
	"github.com/msccl-go/msccl-go/ir"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDType(t *testing.T) {
	for _, d := range DTypes {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), got, err)
		}
	}
	sizes := map[DType]int{F32: 4, F16: 2, BF16: 2, I32: 4, U32: 4, U8: 1}
	for d, n := range sizes {
		if d.Size() != n {
			t.Errorf("%s.Size() = %d, want %d", d, d.Size(), n)
		}
	}
	if _, err := ParseDType("f64"); err == nil {
		t.Error("f64 must be refused")
	}
}

func TestHalfConversions(t *testing.T) {
	tests := []struct {
		in   float32
		f16  uint16
		bf16 uint16
	}{
		{0, 0x0000, 0x0000},
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{65504, 0x7bff, 0x4780},                                     // bf16 rounds up to 65536
		{65520, 0x7c00, 0x4780},                                     // rounds to +inf in f16
		{float32(math.Inf(-1)), 0xfc00, 0xff80},                     // -inf
		{5.960464477539063e-08, 0x0001, 0x3380},                     // smallest f16 subnormal
		{2.980232238769531e-08, 0x0000, 0x3300},                     // half of it: ties to even (0)
		{8.940696716308594e-08, 0x0002, 0x33c0},                     // 1.5 ulp: ties to even (2)
		{0.1, 0x2e66, 0x3dcd},                                       // round to nearest
		{1.0009765625, 0x3c01, 0x3f80},                              // exact in f16; bf16 rounds down
		{1.00048828125, 0x3c00, 0x3f80},                             // f16 tie, to even
		{1.00146484375, 0x3c02, 0x3f80},                             // f16 tie, to even (up)
		{3.3895313892515355e+38, 0x7c00, 0x7f7f},                    // bf16 max
		{float32(math.Float32frombits(0x7f800001)), 0x7e00, 0x7fc0}, // NaN stays NaN
	}
	for _, tc := range tests {
		if got := f32ToF16(tc.in); got != tc.f16 {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", tc.in, got, tc.f16)
		}
		if got := f32ToBF16(tc.in); got != tc.bf16 {
			t.Errorf("f32ToBF16(%g) = %#04x, want %#04x", tc.in, got, tc.bf16)
		}
	}
	// Every finite half widens and narrows back to itself.
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		if f != f {
			continue
		}
		if back := f32ToF16(f); back != uint16(h) {
			t.Fatalf("f16 %#04x -> %g -> %#04x", h, f, back)
		}
	}
}

func TestReducer(t *testing.T) {
	var rd reducer
	enc := func(dt DType, vs ...float64) []byte {
		out := make([]byte, len(vs)*dt.Size())
		for i, v := range vs {
			b := makeValue(dt, v)
			copy(out[i*dt.Size():], b)
		}
		return out
	}
	tests := []struct {
		dt   DType
		op   string
		a, b []float64
		want []float64
	}{
		{F16, "sum", []float64{1, 2048}, []float64{2, 1}, []float64{3, 2048}}, // 2049 rounds to even
		{BF16, "max", []float64{-3, 5}, []float64{2, -7}, []float64{2, 5}},
		{F32, "min", []float64{-3, 5}, []float64{2, -7}, []float64{-3, -7}},
		{I32, "prod", []float64{-3, 5}, []float64{2, -7}, []float64{-6, -35}},
		{U8, "sum", []float64{250, 1}, []float64{10, 2}, []float64{4, 3}}, // wraps
		{U32, "min", []float64{4000000000, 1}, []float64{3, 2}, []float64{3, 1}},
	}
	for _, tc := range tests {
		out := make([]byte, len(tc.a)*tc.dt.Size())
		rd.reduce(tc.dt, reduceOpOf(tc.op), out, [][]byte{enc(tc.dt, tc.a...), enc(tc.dt, tc.b...)})
		if want := enc(tc.dt, tc.want...); string(out) != string(want) {
			t.Errorf("%s %s: got %v, want %v", tc.dt, tc.op, out, want)
		}
	}
}

func TestTopology(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	top, err := LoadTopology(write("ok.yaml", "base: h100\nname: lab\nnvlink_gbps: 300\n"))
	if err != nil {
		t.Fatal(err)
	}
	if top.Name != "lab" || top.NVLinkGBps != 300 || top.HBMGBps != h100.HBMGBps {
		t.Errorf("got %+v", top)
	}
	for _, bad := range []string{"nvlnk_gbps: 3\n", "base: a100\n", "hbm_gbps: 0\n", "port_latency_us: -1\n", "nvlink_gbps: [1]\n"} {
		if _, err := LoadTopology(write("bad.yaml", bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if _, err := LoadTopology(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file: want an error")
	}
}

func TestTrace(t *testing.T) {
	p := fixtures(t)["allreduce_pipeline.json"]
	top := h100
	rep, err := Run(p, Options{Size: 1 << 20, DType: F16, Trace: true, Topology: &top})
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string
			Ph   string
			Ts   float64
			Dur  float64
			Pid  int
			Tid  int
			ID   int
		}
	}
	if err := json.Unmarshal(rep.Trace, &tr); err != nil {
		t.Fatal(err)
	}
	slices, meta := 0, 0
	starts, ends := map[int]bool{}, []int(nil)
	last := 0.0
	for _, e := range tr.TraceEvents {
		switch e.Ph {
		case "X":
			slices++
			if e.Dur <= 0 || e.Ts < 0 {
				t.Fatalf("bad slice %+v", e)
			}
			last = max(last, e.Ts+e.Dur)
		case "M":
			meta++
		case "s":
			starts[e.ID] = true
		case "f":
			ends = append(ends, e.ID)
		}
	}
	if len(ends) == 0 {
		t.Error("no signal → wait flow arrows")
	}
	for _, id := range ends {
		if !starts[id] {
			t.Errorf("flow %d ends without a start", id)
		}
	}
	// 4 ranks × 3 blocks, each block runs its pipeline body once per
	// 512 KiB window of a 256 KiB chunk: 1 iteration of 11, 5 and 11 ops.
	if slices != 4*(11+5+11) || meta != 4+4*3 {
		t.Errorf("%d slices and %d metadata events", slices, meta)
	}
	// 1 MiB allreduce on 4 ranks cannot take less than a microsecond.
	if last < 1 {
		t.Errorf("trace ends at %gµs", last)
	}
	if rep2, _ := Run(p, Options{Size: 1 << 20}); rep2.Trace != nil {
		t.Error("trace built without Options.Trace")
	}
}

func TestReportString(t *testing.T) {
	pl := Place{Rank: 1, Block: 0, Op: 3, Inner: 2, OpName: "put"}
	if got := pl.Path(); got != "gpus[1].threadblocks[0].ops[3].ops[2]" {
		t.Errorf("Path() = %q", got)
	}
	pl.Inner = -1
	if got := pl.Path(); got != "gpus[1].threadblocks[0].ops[3]" {
		t.Errorf("Path() = %q", got)
	}
	for v, s := range map[Verdict]string{Correct: "correct", Deadlock: "deadlock", Race: "race", Unbalanced: "unbalanced", WrongResult: "wrong result"} {
		if v.String() != s {
			t.Errorf("%d.String() = %q", v, v.String())
		}
	}
	r := &Report{Wrong: []Mismatch{{Launch: 1, Rank: 2, Off: 8, Got: "1", Want: "2"}}, WrongTotal: 5}
	r.setVerdict()
	if s := r.String(); !strings.Contains(s, "verdict: wrong result") || !strings.Contains(s, "4 more wrong elements") {
		t.Errorf("String() = %q", s)
	}
	if r.OK() {
		t.Error("OK() with wrong elements")
	}
}

func reduceOpOf(s string) ir.ReduceOp { return ir.ReduceOp(s) }

func makeValue(dt DType, v float64) []byte {
	b := make([]byte, dt.Size())
	switch dt {
	case F32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case F16:
		binary.LittleEndian.PutUint16(b, f32ToF16(float32(v)))
	case BF16:
		binary.LittleEndian.PutUint16(b, f32ToBF16(float32(v)))
	case I32:
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
	case U32:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case U8:
		b[0] = byte(v)
	}
	return b
}
