package kernels

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestGeneratedFilesFresh regenerates the device-interface files into a
// temporary module root and compares them with the committed ones: a
// change to abi.go, layout.go or the ir tables without `go generate
// ./kernels` fails here.
func TestGeneratedFilesFresh(t *testing.T) {
	tmp := t.TempDir()
	if err := WriteGenerated(tmp); err != nil {
		t.Fatal(err)
	}
	fs, err := GeneratedFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		fresh, err := os.ReadFile(filepath.Join(tmp, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("..", f.Path))
		if err != nil {
			t.Errorf("%s: %v (run go generate ./kernels)", f.Path, err)
			continue
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s is stale: run go generate ./kernels", f.Path)
		}
		if !strings.HasPrefix(string(committed), "// Code generated ") || !strings.Contains(string(committed), "DO NOT EDIT.") {
			t.Errorf("%s lacks the generated-code line", f.Path)
		}
	}
}

// TestGeneratedCodes checks the generated names against the tables they
// come from, so that a renderer bug cannot pass as fresh.
func TestGeneratedCodes(t *testing.T) {
	h := string(abiHeader())
	for _, want := range []string{
		"#define CHAN_PORT 2\n", "#define REF_PACKET 2\n", "#define FIFO_SIGNAL 2\n",
		"#define FIFO_KIND_SHIFT 56\n", "#define FIFO_SEQ_MASK 0xffffffffffull\n",
		"#define WD_FIFO_FULL 6\n", "#define RED_PROD 3\n", "#define DT_F8E5M2 7\n",
		"#define MAXR 10 ",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("abi.cuh lacks %q", want)
		}
	}
	if p := string(proxyHeader()); !strings.Contains(p, "#define MC_FIFO_FLUSH 3\n") {
		t.Errorf("abi.h lacks MC_FIFO_FLUSH:\n%s", p)
	}
	if int(ir.ChanPort) != 2 || MaxRefs != ir.MaxRefsPerOp {
		t.Errorf("channel or limit codes moved: update the expectations")
	}
}

// TestEncodeIsMemoryImage ties the encoders to the Go layout: on a
// little-endian host (every CUDA host) each encoded struct is the struct's
// own bytes. abi_check.cuh ties that layout to the kernel's.
func TestEncodeIsMemoryImage(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("big-endian host")
	}
	image := func(p unsafe.Pointer, n uintptr) []byte { return unsafe.Slice((*byte)(p), n) }
	op := Op{Code: 1, NSrc: 2, NDst: 3, NIdx: 4, Reduce: 5, ChanType: 6, NPipe: 7, Ref0: 0x0908, Idx0: 0x0b0a,
		Barrier: 0x0d0c, NumTBs: 0x0f0e, Unit: 0x13121110, NIter: 0x17161514}
	ref := Ref{Ptr: 0x0706050403020100, Size: 0x0b0a0908, Flags: 0x0d0c, Peer: -2}
	tb := Table{Ops: []Op{op}, Refs: []Ref{ref}}
	enc, err := tb.Encode()
	if err != nil {
		t.Fatal(err)
	}
	h := TableHeader{NOps: 1, NRefs: 1, Bytes: uint32(len(enc))}
	want := append(append(append([]byte{}, image(unsafe.Pointer(&h), unsafe.Sizeof(h))...),
		image(unsafe.Pointer(&op), unsafe.Sizeof(op))...), image(unsafe.Pointer(&ref), unsafe.Sizeof(ref))...)
	if !bytes.Equal(enc[:len(want)], want) {
		t.Errorf("table:\n got % x\nwant % x", enc[:len(want)], want)
	}
	var a Args
	for i, p := 0, (*[ArgsBytes]byte)(unsafe.Pointer(&a)); i < ArgsBytes; i++ {
		p[i] = byte(i + 1)
	}
	wantArgs := append([]byte(nil), image(unsafe.Pointer(&a), unsafe.Sizeof(a))...)
	clear(wantArgs[ArgsBytes-4:]) // the blank padding word encodes as zero
	if got := a.Encode(); !bytes.Equal(got, wantArgs) {
		t.Errorf("args:\n got % x\nwant % x", got, wantArgs)
	}
	c := []Chan{{Inbound: 1, RemoteInbound: 2, Expected: 3, Peer: -4, Index: 5}}
	if got := EncodeChans(c); !bytes.Equal(got, image(unsafe.Pointer(&c[0]), unsafe.Sizeof(c[0]))) {
		t.Errorf("chan: % x", got)
	}
	th := []byte{}
	hdr := TraceHeader{Count: 3, Launch: 9}
	th = append(th, image(unsafe.Pointer(&hdr), unsafe.Sizeof(hdr))...)
	recs := []TraceRecord{{Start: 1, End: 2, Op: 3, Iter: 4}, {Start: 5, End: 6, Op: 7, Iter: 8}}
	for i := range recs {
		th = append(th, image(unsafe.Pointer(&recs[i]), unsafe.Sizeof(recs[i]))...)
	}
	if launch, got, dropped := DecodeTrace(th, 2); launch != 9 || dropped != 1 || len(got) != 2 || got[0] != recs[0] || got[1] != recs[1] {
		t.Errorf("trace decoded as %d %+v %d", launch, got, dropped)
	}
	w := WatchRecord{Kind: WatchFifoFull, Rank: 1, Block: 2, Op: 3, ChanType: 4, Channel: 5, Peer: -6, Expected: 7, Seen: 8}
	if got, ok := DecodeWatch(image(unsafe.Pointer(&w), unsafe.Sizeof(w))); !ok || got != w {
		t.Errorf("watch record decoded as %+v, %v", got, ok)
	}
}

// TestLayoutAssertionsBite: NVRTC must reject a kernel whose structs
// disagree with Go, or the assertions prove nothing.
func TestLayoutAssertionsBite(t *testing.T) {
	nvrtctest.Need(t)
	src, err := SourceFor(ir.F32, 16)
	if err != nil {
		t.Fatal(err)
	}
	good := "ABI_OFFSETOF(Args, rank) == 128,"
	if !strings.Contains(src, good) {
		t.Fatalf("source lacks %q", good)
	}
	bad := strings.Replace(src, good, "ABI_OFFSETOF(Args, rank) == 132,", 1)
	_, log, err := nvrtc.Compile(bad, "bad.cu", CompileOptions("compute_90"))
	if err == nil || !strings.Contains(log, "Args.rank") {
		t.Errorf("a wrong offset compiled (err %v):\n%s", err, log)
	}
}
