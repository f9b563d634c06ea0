package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestKernelsCompile: every example kernel compiles to PTX with NVRTC and
// the headers of this build (CI: Debian's NVRTC 11.8, no GPU).
func TestKernelsCompile(t *testing.T) {
	nvrtctest.Need(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	files, _ := filepath.Glob("*.cu")
	if len(files) < 2 {
		t.Fatalf("kernels: %v", files)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(f, ".cu")
		k, err := msccl.CompileKernel(string(src), name, msccl.KernelOptions{Arch: "compute_90"})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(string(k.Image()), ".entry "+name) {
			t.Errorf("%s: no entry %s", f, name)
		}
	}
}

// gpu is device 0's primary context, current on this locked thread, or
// a skip where there is no GPU.
func gpu(t *testing.T) {
	t.Helper()
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device (%d, %v)", n, err)
	}
	ctx, err := cuda.Device(0).PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Release() })
	if err := ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
}

// loopback builds the two ends of one memory channel in this process on
// one GPU (end 0's signal lands in end 1's inbound word and back), with
// timeout for their waits; it returns the handles in device memory and
// the watchdog records in mapped host memory.
func loopback(t *testing.T, timeout time.Duration) (cuda.DevicePtr, *cuda.HostMem) {
	t.Helper()
	words, err := cuda.Malloc(4 * 8) // inbound 0, inbound 1, expected 0, expected 1
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.Free(words) })
	if err := cuda.Memset8(words, 0, 32); err != nil {
		t.Fatal(err)
	}
	rec, err := cuda.HostAllocMapped(int64(2 * kernels.WatchBytes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Free() })
	w := kernels.Watch{Records: uint64(rec.Dev), TimeoutNs: uint64(timeout), NRecords: 2}
	var hs [2]kernels.MemoryChannelHandle
	for e := range hs {
		hs[e].Sem = kernels.SemaphoreHandle{Chan: kernels.Chan{
			Inbound: uint64(words) + uint64(8*e), RemoteInbound: uint64(words) + uint64(8*(1-e)),
			Expected: uint64(words) + uint64(16+8*e), Peer: int32(1 - e), Index: uint32(e),
		}, Watch: w}
	}
	img, err := kernels.EncodeHandles(hs[:])
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cuda.Malloc(int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.Free(dev) })
	if err := cuda.MemcpyHtoD(dev, img); err != nil {
		t.Fatal(err)
	}
	return dev, rec
}

// pingpongKernel is pingpong.cu compiled for this GPU and 16 bytes of
// device memory for its times.
func pingpongKernel(t *testing.T) (*msccl.Kernel, cuda.DevicePtr) {
	t.Helper()
	src, err := os.ReadFile("pingpong.cu")
	if err != nil {
		t.Fatal(err)
	}
	k, err := msccl.CompileKernel(string(src), "pingpong", msccl.KernelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cuda.Malloc(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.Free(out) })
	return k, out
}

// The ping-pong kernel's two ends as blocks 0 and 1 of one launch on one
// GPU: every round trip completes, and the time per trip is logged.
func TestPingPongLoopback(t *testing.T) {
	gpu(t)
	hs, _ := loopback(t, 5*time.Second)
	k, out := pingpongKernel(t)
	const rounds = 10000
	if err := k.Launch(0, [3]uint32{2, 1, 1}, [3]uint32{32, 1, 1}, msccl.DevicePtr(hs), int32(1), int32(rounds), msccl.DevicePtr(out)); err != nil {
		t.Fatal(err)
	}
	if err := cuda.StreamOf(0).Synchronize(); err != nil {
		t.Fatal(err)
	}
	var ns [16]byte
	if err := cuda.MemcpyDtoH(ns[:], out); err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		d := binary.LittleEndian.Uint64(ns[8*b:])
		if d == 0 {
			t.Fatalf("block %d: a wait timed out", b)
		}
		t.Logf("block %d: %d round trips in %v, %.3f us each", b, rounds, time.Duration(d), float64(d)/rounds/1e3)
	}
}

// A wait whose signal never comes ends by the watchdog, which writes the
// block's record: rank, block, user op, channel, peer, counts.
func TestWaitWithoutSignal(t *testing.T) {
	gpu(t)
	hs, rec := loopback(t, 200*time.Millisecond)
	k, out := pingpongKernel(t)
	// One block, the answering side (first = 0): nobody starts.
	start := time.Now()
	if err := k.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, msccl.DevicePtr(hs), int32(0), int32(1), msccl.DevicePtr(out)); err != nil {
		t.Fatal(err)
	}
	if err := cuda.StreamOf(0).Synchronize(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with a 200ms watchdog", d)
	}
	w, ok := kernels.DecodeWatch(rec.Bytes)
	if !ok || w.Kind != kernels.WatchSignal || w.Block != 0 || w.Op != kernels.WatchUserOp || w.ChanType != 1 || w.Channel != 0 || w.Peer != 1 || w.Expected != 1 || w.Seen != 0 {
		t.Errorf("record %+v (written: %v)", w, ok)
	}
}
