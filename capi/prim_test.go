package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// The launch arguments' kinds become the Go types Kernel.Launch passes
// by value; a kind it does not know, or a count that differs, is
// refused naming the argument.
func TestLaunchArgs(t *testing.T) {
	args, err := launchArgs("iIlLfdbp", []uint64{math.MaxUint64, 7, 1 << 40, 9, uint64(math.Float32bits(1.5)), math.Float64bits(-2.25), 1, 0xdead0000})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int32(-1), uint32(7), int64(1 << 40), uint64(9), float32(1.5), float64(-2.25), true, msccl.DevicePtr(0xdead0000)}
	for i := range want {
		if args[i] != want[i] {
			t.Errorf("argument %d: %#v (%T), want %#v (%T)", i, args[i], args[i], want[i], want[i])
		}
	}
	for _, tc := range []struct {
		kinds string
		words []uint64
		want  string
	}{
		{"ix", []uint64{1, 2}, `argument 1 has kind 'x'`},
		{"i", []uint64{1, 2}, "1 argument kinds for 2 arguments"},
		{"w", []uint64{1 << 40}, "argument 0 (a watch): no handle array with handle"},
	} {
		st, msg := guard(func() error { _, err := launchArgs(tc.kinds, tc.words); return err })
		if st != statusInvalid || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %s %q, want %q", tc.kinds, statusName[st], msg, tc.want)
		}
	}
}

// A world of one rank on the cpu device, through the functions the
// exports call: a buffer registers, a Go slice is refused, the handle
// array of no channels is empty, and on the cpu device a kernel launch
// through the communicator is refused before any driver call. The
// multi-process runs are python/tests' test_primitives (three processes
// through the real ABI) and the root package's TestChannelsProcs.
func TestChannelsOneRank(t *testing.T) {
	for _, k := range []string{"MSCCL_RANK", "MSCCL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "MSCCL_UNIQUE_ID"} {
		t.Setenv(k, "")
	}
	live := table.live()
	ch, err := openComm("cpu", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, addr, err := allocBuffer(ch, 4096)
	if err != nil || addr == 0 {
		t.Fatalf("alloc: %v %#x", err, addr)
	}
	// The buffer is shared memory mapped outside the Go heap: its
	// address is a C caller's pointer.
	bufp := unsafe.Add(unsafe.Pointer(nil), addr)
	goMem := make([]byte, 4096)
	for _, tc := range []struct {
		p    unsafe.Pointer
		n    int64
		want string
	}{
		{unsafe.Pointer(&goMem[0]), 4096, "host memory of this process"},
		{bufp, 2048, "2048 bytes of a 4096-byte buffer"},
		{nil, 0, "the buffer is empty"},
	} {
		if _, err := register(ch, tc.p, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("register %d bytes: %v, want %q", tc.n, err, tc.want)
		}
	}
	reg, err := register(ch, bufp, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := buildChannels(ch, "memory", []int{0}, reg, reg); err == nil || !strings.Contains(err.Error(), "is the rank itself") {
		t.Errorf("a channel to itself: %v", err)
	}
	if _, _, err := buildChannels(ch, "memory", nil, reg, reg+1000); err == nil || !strings.Contains(err.Error(), "no local or remote registration") {
		t.Errorf("an unknown registration: %v", err)
	}
	if _, _, err := buildChannels(ch, "switch", nil, reg, reg); err == nil || !strings.Contains(err.Error(), "channel kind") {
		t.Errorf("kind switch: %v", err)
	}
	hs, info, err := buildChannels(ch, "port", nil, reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"port","ptr":0,"count":0,"handle_bytes":0,"nbytes":0,"device":"cpu","watch":`; !strings.HasPrefix(string(info), want) {
		t.Errorf("info %s, want %s...", info, want)
	}
	if err := checkChannels(hs); err != nil {
		t.Error(err)
	}
	if nvrtcLoads(t) {
		k, err := compileKernel(`extern "C" __global__ void k(int) {}`, "k", "compute_90", `["-DX=1"]`)
		if err != nil {
			t.Fatal(err)
		}
		st, msg := guard(func() error { return launchKernel(k, ch, 0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, "i", []uint64{1}) })
		if st != statusInvalid || !strings.Contains(msg, "the communicator's device is cpu") {
			t.Errorf("launch on cpu: %s %q", statusName[st], msg)
		}
		if _, err := compileKernel("", "k", "", `-DX`); err == nil || !strings.Contains(err.Error(), "JSON array") {
			t.Errorf("options not JSON: %v", err)
		}
		table.release(k)
	}
	for _, h := range []int64{hs, reg, b, ch} {
		if err := table.release(h); err != nil {
			t.Errorf("release %d: %v", h, err)
		}
	}
	if n := table.live(); n != live {
		t.Errorf("%d handles live after release, want %d", n, live)
	}
}

// nvrtcLoads is whether NVRTC is there (else the kernel cases skip).
func nvrtcLoads(t *testing.T) bool {
	ok := false
	t.Run("nvrtc", func(t *testing.T) { nvrtctest.Need(t); ok = true })
	return ok
}

// The kernels of examples/python, which run only on a GPU, compile to
// PTX with NVRTC and this build's headers (CI: no GPU). Each is named, so
// a kernel renamed or removed fails here rather than going unchecked.
func TestPythonExampleKernels(t *testing.T) {
	nvrtctest.Need(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, name := range []string{"allgather", "fused_allgather"} {
		src, err := os.ReadFile(filepath.Join("..", "examples", "python", name+".cu"))
		if err != nil {
			t.Fatal(err)
		}
		k, err := msccl.CompileKernel(string(src), name, msccl.KernelOptions{Arch: "compute_90"})
		if err == nil && !strings.Contains(string(k.Image()), ".entry "+name) {
			err = fmt.Errorf("no .entry %s in the PTX", name)
		}
		if err != nil {
			t.Errorf("%s.cu: %v", name, err)
		}
	}
}
