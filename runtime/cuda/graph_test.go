package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

func TestWriteValue64(t *testing.T) {
	setup(t)
	s := testStream(t)
	d := testMalloc(t, 16)
	h := testHostMem(t, 16)
	fb, err := s.writeValueKernel()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// write stores v at a through the driver's stream memory op or
		// through the fallback kernel.
		write func(a DevicePtr, v uint64) error
	}{
		{"cuStreamWriteValue64", s.WriteValue64},
		{"fallback kernel", func(a DevicePtr, v uint64) error {
			av, vv := uint64(a), v
			return fb.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, unsafe.Pointer(&av), unsafe.Pointer(&vv))
		}},
	} {
		const v1, v2 = 0x0123456789abcdef, 0xfedcba9876543210
		if err := tc.write(d+8, v1); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := tc.write(h.Dev, v2); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		got := readDevice(t, d+8, 8)
		if g := binary.LittleEndian.Uint64(got); g != v1 {
			t.Errorf("%s: device word %#x", tc.name, g)
		}
		if g := binary.LittleEndian.Uint64(h.Bytes); g != v2 {
			t.Errorf("%s: mapped host word %#x", tc.name, g)
		}
		clear(h.Bytes)
	}
}

func TestGraphCaptureReplay(t *testing.T) {
	setup(t)
	_, f := loadAdd1(t)
	const n = 256
	p := testMalloc(t, 4*n)
	flag := testMalloc(t, 8)
	if err := Memset8(p, 0, 4*n); err != nil {
		t.Fatal(err)
	}
	s := testStream(t)
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	arg, cnt := uint64(p), uint32(n)
	lerr := f.Launch([3]uint32{1, 1, 1}, [3]uint32{n, 1, 1}, 0, s, unsafe.Pointer(&arg), unsafe.Pointer(&cnt))
	werr := s.WriteValue64(flag, 42)
	g, err := s.EndCapture()
	if lerr != nil || werr != nil || err != nil {
		t.Fatalf("capture: launch %v, write %v, end %v", lerr, werr, err)
	}
	defer g.Destroy()
	// Nothing ran during capture.
	out := readDevice(t, p, 4*n)
	if u32s(out)[0] != 0 {
		t.Fatal("captured work ran eagerly")
	}
	ge, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer ge.Destroy()
	const replays = 5
	for i := 0; i < replays; i++ {
		if err := ge.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := MemcpyDtoH(out, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range u32s(out) {
		if v != replays {
			t.Fatalf("data[%d] = %d after %d replays", i, v, replays)
		}
	}
	fv := readDevice(t, flag, 8)
	if binary.LittleEndian.Uint64(fv) != 42 {
		t.Errorf("captured WriteValue64 wrote %d", binary.LittleEndian.Uint64(fv))
	}
}

func TestPeerAndIPC(t *testing.T) {
	ctx := setup(t)
	if ok, err := CanAccessPeer(0, 0); err != nil || !ok {
		t.Errorf("CanAccessPeer(0,0) = %v, %v", ok, err)
	}
	if err := ctx.EnablePeerAccess(ctx); err != nil {
		t.Errorf("self peer access: %v", err)
	}
	n, _ := DeviceCount()
	for b := 1; b < n; b++ {
		ok, err := CanAccessPeer(0, Device(b))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		peer, err := Device(b).PrimaryContext()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ { // the second call hits "already enabled"
			if err := ctx.EnablePeerAccess(peer); err != nil {
				t.Errorf("peer access 0->%d (try %d): %v", b, i, err)
			}
		}
		peer.Release()
	}
	p := testMalloc(t, 1<<20)
	h, err := IpcGetMemHandle(p)
	if err != nil {
		t.Fatal(err)
	}
	if h == (IpcMemHandle{}) {
		t.Error("IPC handle is all zero")
	}
	q, err := IpcOpenMemHandle(h)
	if err != nil {
		// Expected: the driver does not import a process's own handles.
		t.Logf("in-process IpcOpenMemHandle refused as expected: %v", err)
		return
	}
	t.Logf("in-process IpcOpenMemHandle succeeded: %#x", uint64(q))
	if err := IpcCloseMemHandle(q); err != nil {
		t.Error(err)
	}
}

func BenchmarkLaunch(b *testing.B) {
	setup(b)
	_, f := loadAdd1(b)
	p := testMalloc(b, 4)
	s := testStream(b)
	arg, cnt := uint64(p), uint32(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.Launch([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, s, unsafe.Pointer(&arg), unsafe.Pointer(&cnt)); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/launch")
}
