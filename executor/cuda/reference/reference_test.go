package reference

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestCompilePTX compiles reference kernels with whatever NVRTC is
// installed (CI: Debian's 11.8) down to sm_80 machine code, which checks
// RefArgs against Args and that no kernel spills to local memory.
func TestCompilePTX(t *testing.T) {
	nvrtctest.Need(t)
	cases := []struct {
		k  string
		dt ir.DType
		ll int
	}{
		{"allreduce_oneshot_ll", ir.F16, 16}, {"allreduce_oneshot_ll", ir.F32, 8},
		{"allreduce_twoshot", ir.BF16, 16}, {"allreduce_twoshot", ir.F8E4M3, 16}, {"allreduce_oneshot_ll", ir.F8E5M2, 16},
		{"allgather_direct", ir.F32, 16},
	}
	if fulltest.Sample() {
		cases = cases[:1]
	}
	for _, c := range cases {
		k, err := Lookup(c.k)
		if err != nil {
			t.Fatal(err)
		}
		src, entry, err := k.Source(c.dt, c.ll)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(entry, func(t *testing.T) {
			// A real architecture, so that ptxas runs and reports: a
			// yardstick that spills registers to local memory measures
			// the spills, not the collective.
			opts := append(kernels.CompileOptions("sm_80"), "--ptxas-options=-v")
			img, log, err := nvrtc.Compile(src, entry+".cu", opts)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if !strings.Contains(string(img), entry) {
				t.Errorf("image has no entry %s", entry)
			}
			if !strings.Contains(log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") {
				t.Errorf("%s uses local memory:\n%s", entry, ptxasLines(log))
			}
		})
	}
}

// ptxasLines keeps ptxas's report from an NVRTC log.
func ptxasLines(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "ptxas") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestEncodeIsMemoryImage(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("big-endian host")
	}
	var a Args
	for i, p := 0, (*[ArgsBytes]byte)(unsafe.Pointer(&a)); i < ArgsBytes; i++ {
		p[i] = byte(i*7 + 1)
	}
	a.NRanks, a.Red = 8, 3
	img := unsafe.Slice((*byte)(unsafe.Pointer(&a)), ArgsBytes)
	got := a.Encode()
	// The blank padding word encodes as zero.
	want := append([]byte(nil), img...)
	copy(want[ArgsBytes-4:], []byte{0, 0, 0, 0})
	if !bytes.Equal(got, want) {
		t.Errorf("Encode differs from the struct's bytes:\n got % x\nwant % x", got, want)
	}
}

func TestChunkAndNames(t *testing.T) {
	ll, _ := Lookup("allreduce_oneshot_ll")
	if c, err := ll.Chunk(8, 8<<10, 16); err != nil || c != 1<<10 {
		t.Errorf("chunk %d, %v", c, err)
	}
	for _, bad := range []struct {
		ranks int
		in    int64
	}{{8, 100}, {1, 1024}, {33, 33 << 10}, {8, 8 * 4}} {
		if _, err := ll.Chunk(bad.ranks, bad.in, 16); err == nil {
			t.Errorf("Chunk(%d, %d) accepted", bad.ranks, bad.in)
		}
	}
	ag, _ := Lookup("allgather_direct")
	if c, err := ag.Chunk(8, 64, 16); err != nil || c != 64 || ag.ScratchBytes(8, c) != 0 {
		t.Errorf("allgather chunk %d, %v", c, err)
	}
	if _, err := Lookup("allreduce_ring"); err == nil || !strings.Contains(err.Error(), "allreduce_twoshot") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := ll.EntryName(ir.Symbolic, 16); err == nil {
		t.Error("symbolic type accepted")
	}
}
