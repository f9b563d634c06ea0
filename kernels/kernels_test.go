package kernels

import (
	"fmt"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

func TestHeaderFollowsOpTable(t *testing.T) {
	h := Source()
	for _, in := range ir.Ops() {
		want := "#define OP_" + strings.ToUpper(in.Name) + " "
		if !strings.Contains(h, want) {
			t.Errorf("kernel source lacks %q", want)
		}
	}
}

// TestCompilePTX compiles every kernel instance to PTX for compute_90 with
// whatever NVRTC is installed (CI: Debian's 11.8 without CUDA headers).
func TestCompilePTX(t *testing.T) {
	nvrtctest.Need(t)
	cases := []struct {
		dt ir.DType
		ll int
	}{{ir.F32, 16}, {ir.F16, 16}, {ir.BF16, 8}, {ir.I32, 16}, {ir.U32, 8}, {ir.U8, 16}, {ir.F8E4M3, 16}, {ir.F8E5M2, 8}}
	if fulltest.Sample() {
		cases = cases[:1]
	}
	for _, c := range cases {
		name, err := KernelName(c.dt, c.ll)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			src, err := SourceFor(c.dt, c.ll)
			if err != nil {
				t.Fatal(err)
			}
			ptx, log, err := nvrtc.Compile(src, name+".cu", CompileOptions("compute_90"))
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if !strings.Contains(string(ptx), ".entry "+name) {
				t.Errorf("PTX has no entry %s", name)
			}
			// The memory-ordering primitives must survive as written.
			for _, ins := range []string{"ld.acquire.sys", "red.release.sys", "st.volatile.global.v"} {
				if !strings.Contains(string(ptx), ins) {
					t.Errorf("PTX lacks %s", ins)
				}
			}
		})
	}
}

// TestDTypeCodes: the kernel's DT_* codes are ir.DType's.
func TestDTypeCodes(t *testing.T) {
	src := Source()
	for _, d := range ir.DTypes {
		if want := fmt.Sprintf("#define DT_%s %d\n", strings.ToUpper(d.String()), d); !strings.Contains(src, want) {
			t.Errorf("kernel source lacks %q", want)
		}
	}
}

func TestKernelNameRejects(t *testing.T) {
	for _, c := range []struct {
		dt ir.DType
		ll int
	}{{ir.F32, 4}, {ir.DType(99), 16}, {ir.Symbolic, 16}} {
		if _, err := KernelName(c.dt, c.ll); err == nil {
			t.Errorf("KernelName(%v, %d) accepted", c.dt, c.ll)
		}
	}
}

func TestTableEncode(t *testing.T) {
	tb := Table{
		Ops:  []Op{{Code: uint8(ir.OpPut), NSrc: 1, NDst: 1, Unit: 7, NIter: 9}},
		Refs: []Ref{{Ptr: 0x1000, Size: 64, Flags: RefPacket, Peer: -1}, {Ptr: 0x2000, Size: 64, Peer: 1}},
		Idx:  []uint16{3},
	}
	b, err := tb.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := HeaderBytes + OpBytes + 2*RefBytes + 2
	want = (want + 15) &^ 15
	if len(b) != want || len(b)%16 != 0 {
		t.Fatalf("encoded %d bytes, want %d", len(b), want)
	}
	if b[HeaderBytes] != uint8(ir.OpPut) || b[HeaderBytes+16] != 7 || b[HeaderBytes+20] != 9 {
		t.Errorf("op fields misplaced: % x", b[HeaderBytes:HeaderBytes+OpBytes])
	}
	r := HeaderBytes + OpBytes
	if b[r+1] != 0x10 || b[r+8] != 64 || b[r+12] != RefPacket || b[r+14] != 0xff {
		t.Errorf("ref fields misplaced: % x", b[r:r+RefBytes])
	}
}

func TestWatchRoundTrip(t *testing.T) {
	b := make([]byte, WatchBytes)
	if _, ok := DecodeWatch(b); ok {
		t.Fatal("empty record decoded as stuck")
	}
	b[0], b[4], b[8], b[24], b[32] = 1, 2, 3, 0xff, 5
	b[25], b[26], b[27] = 0xff, 0xff, 0xff
	w, ok := DecodeWatch(b)
	if !ok || w.Rank != 2 || w.Block != 3 || w.Peer != -1 || w.Expected != 5 || w.What() != "signal wait" {
		t.Errorf("decoded %+v", w)
	}
}

// TestCompileTracePTX compiles the traced instance; the untraced source
// must not contain the tracing code at all (no cost when off).
func TestCompileTracePTX(t *testing.T) {
	plain, err := SourceFor(ir.F16, 16)
	if err != nil {
		t.Fatal(err)
	}
	src, err := TraceSourceFor(ir.F16, 16)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, "#define MSCCL_TRACE") || !strings.HasPrefix(src, "#define MSCCL_TRACE 1\n") {
		t.Fatal("MSCCL_TRACE defined in the wrong instance")
	}
	nvrtctest.Need(t)
	fulltest.Skip(t, "a second NVRTC compile (TestCompilePTX compiles the untraced kernel)")
	name, _ := KernelName(ir.F16, 16)
	ptx, log, err := nvrtc.Compile(src, name+"_trace.cu", CompileOptions("compute_90"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(string(ptx), ".entry "+name+"_trace") {
		t.Errorf("PTX has no entry %s_trace", name)
	}
}

// TestCompileStagePTX compiles the staging instance of every data type
// and packet width: its entry takes the Args pointer and a Stage of
// kernels.Stage's size by value, and the other instances contain none of
// its code.
func TestCompileStagePTX(t *testing.T) {
	plain, err := SourceFor(ir.F32, 16)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, "#define MSCCL_STAGE") {
		t.Fatal("MSCCL_STAGE defined in the plain instance")
	}
	nvrtctest.Need(t)
	cases := [][2]int{}
	for _, dt := range ir.DTypes {
		for _, ll := range []int{8, 16} {
			cases = append(cases, [2]int{int(dt), ll})
		}
	}
	if fulltest.Sample() {
		cases = cases[:1]
	}
	for _, c := range cases {
		dt, ll := ir.DType(c[0]), c[1]
		name, err := KernelName(dt, ll)
		if err != nil {
			t.Fatal(err)
		}
		name += "_stage"
		t.Run(name, func(t *testing.T) {
			src, err := StageSourceFor(dt, ll)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(src, "#define MSCCL_STAGE 1\n") {
				t.Fatal("MSCCL_STAGE not defined in the staging instance")
			}
			ptx, log, err := nvrtc.Compile(src, name+".cu", CompileOptions("compute_90"))
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			want := fmt.Sprintf(".param .align 8 .b8 %s_param_1[%d]", name, StageBytes)
			if !strings.Contains(string(ptx), ".entry "+name) || !strings.Contains(string(ptx), want) {
				t.Errorf("PTX has no entry %s taking %q", name, want)
			}
		})
	}
}
