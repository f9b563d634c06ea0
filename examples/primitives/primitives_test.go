package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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

// entries is every example kernel: its file and entry point (main.go
// compiles each by that name).
var entries = map[string]string{
	"pingpong.cu":       "pingpong",
	"bandwidth.cu":      "bandwidth",
	"port_bandwidth.cu": "port_bandwidth",
	"overlap.cu":        "overlap",
	"pattern.cu":        "pattern",
}

// TestKernelsCompile: every example kernel compiles to PTX with NVRTC and
// the headers of this build (CI: Debian's NVRTC 11.8, no GPU).
func TestKernelsCompile(t *testing.T) {
	nvrtctest.Need(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	files, _ := filepath.Glob("*.cu")
	if len(files) != len(entries) {
		t.Errorf("kernels %v, want the %d of entries", files, len(entries))
	}
	for _, f := range files {
		name, ok := entries[f]
		if !ok {
			t.Errorf("%s: not in entries", f)
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		k, err := msccl.CompileKernel(string(src), name, msccl.KernelOptions{Arch: "compute_90"})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(string(k.Image()), ".entry "+name) {
			t.Errorf("%s: no entry %s", f, name)
		}
		if name == "overlap" {
			loopNotFolded(t, string(k.Image()))
		}
	}
}

// loopNotFolded: overlap.cu's loop does one multiply-add per round, as
// the example's figures say: unrolled, the compiler composes rounds into
// one multiply-add of other constants.
func loopNotFolded(t *testing.T, ptx string) {
	t.Helper()
	n := 0
	for _, l := range strings.Split(ptx, "\n") {
		if !strings.Contains(l, "mad.lo") {
			continue
		}
		n++
		if !strings.HasSuffix(strings.TrimSpace(l), ", 1664525, 1013904223;") {
			t.Errorf("overlap.cu: the loop's rounds are folded: %s", strings.TrimSpace(l))
		}
	}
	if n != 1 {
		t.Errorf("overlap.cu: %d multiply-adds in the PTX, want the loop's one", n)
	}
}

// lcgRounds composes overlap.cu's loop: the same as running it.
func TestLCGRounds(t *testing.T) {
	for _, iters := range []int{0, 1, 2, 64, 1000} {
		mul, add := lcgRounds(iters)
		for _, x0 := range []uint32{0, 1, 0xdeadbeef, ^uint32(0)} {
			x := x0
			for range iters {
				x = x*1664525 + 1013904223
			}
			if got := mul*x0 + add; got != x {
				t.Errorf("%d rounds of %#x: composed %#x, looped %#x", iters, x0, got, x)
			}
		}
	}
}

// Every (rank, mode, size) the example sends has a seed of its own, so a
// receiver never passes its check on data another step left behind.
func TestSeedsDistinct(t *testing.T) {
	seen := map[uint32]string{}
	add := func(r, mode int, size int64) {
		s := seed(r, mode, size)
		k := fmt.Sprintf("rank %d mode %d size %d", r, mode, size)
		if old, ok := seen[s]; ok {
			t.Errorf("%s and %s share seed %#x", old, k, s)
		}
		seen[s] = k
	}
	for r := range 2 {
		for size := int64(1 << 10); size <= maxBytes; size *= 4 {
			for mode := range nModes {
				add(r, mode, size)
			}
		}
		for mode := 8; mode < 8+6; mode++ { // the overlap example's
			add(r, mode, overlapBytes)
		}
	}
}

// A refusal of PortChannels, which every rank gets alike, yields its
// reason (the example then prints the port column as "-"); any other
// error none. The refusal is the communicator's own: a one-rank job on
// the cpu device asked for port channels without registrations.
func TestPortRefusal(t *testing.T) {
	rc := solo(t, "cpu")
	_, err := rc.PortChannels(context.Background(), nil, nil, nil, nil)
	if err == nil {
		t.Fatal("PortChannels without registrations: no error")
	}
	if why := portRefusal(err); why != "rank 0: no local or remote registration" {
		t.Errorf("portRefusal(%q) = %q", err, why)
	}
	if why := portRefusal(errors.New("msccl: PortChannels: cuMemcpyPeerAsync: invalid value")); why != "" {
		t.Errorf("another error taken for a refusal: %q", why)
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

// solo opens a job of this one process on device, the launchers'
// variables cleared so that it joins no job of the environment.
func solo(t *testing.T, device string) *msccl.RankComm {
	t.Helper()
	for _, v := range []string{"MSCCL_RANK", "MSCCL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"} {
		t.Setenv(v, "")
	}
	rc, err := msccl.OpenComm(context.Background(), msccl.CommOptions{Device: device})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

// oneRank is a one-process cuda job with the example's check kernel and
// scratch buffer, or a skip where there is no GPU.
func oneRank(t *testing.T) *example {
	t.Helper()
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	rc := solo(t, "cuda")
	e := &example{ctx: context.Background(), rc: rc}
	var err error
	if e.scratch, err = rc.AllocBuffer(4096); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.scratch.Close() })
	if e.pat, err = msccl.CompileKernel(patternSrc, "pattern", msccl.KernelOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// The receivers' check passes on the data as sent and names the first
// wrong word of data that differs; the overlap kernel's loop, run alone,
// gives what lcgRounds composes.
func TestGPUChecks(t *testing.T) {
	e := oneRank(t)
	const words = 1 << 18
	buf, err := e.rc.AllocBuffer(4 * words)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	out, err := e.rc.AllocBuffer(4 * words)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := e.fill(buf.DevicePtr(), words, 7); err != nil {
		t.Fatal(err)
	}
	if err := e.verify("the pattern", buf.DevicePtr(), words, 7, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.verify("another seed", buf.DevicePtr(), words, 8, 1, 0); err == nil {
		t.Error("data of seed 7 passed as seed 8's")
	}
	if err := e.rc.Do(func() error { return cuda.MemcpyHtoD(buf.DevicePtr()+4096, []byte{1, 2, 3, 4}) }); err != nil {
		t.Fatal(err)
	}
	err = e.verify("one word changed", buf.DevicePtr(), words, 7, 1, 0)
	if err == nil || !strings.Contains(err.Error(), "1 of 262144 received words are wrong, the first at byte 4096") {
		t.Errorf("one word changed: %v", err)
	}
	ov, err := msccl.CompileKernel(overlapSrc, "overlap", msccl.KernelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 100
	err = e.rc.Do(func() error {
		return ov.Launch(0, [3]uint32{8, 1, 1}, [3]uint32{256, 1, 1}, msccl.DevicePtr(0), msccl.DevicePtr(0), kernels.Watch{},
			uint32(0), uint64(0), uint64(0), buf.DevicePtr(), out.DevicePtr(), uint64(words), int32(rounds))
	})
	if err != nil {
		t.Fatal(err)
	}
	mul, add := lcgRounds(rounds)
	// Word 1024 of the input was changed above: its result differs.
	err = e.verify("the loop", out.DevicePtr(), words, 7, mul, add)
	if err == nil || !strings.Contains(err.Error(), "1 of 262144 received words are wrong, the first at byte 4096") {
		t.Errorf("the loop: %v", err)
	}
}
