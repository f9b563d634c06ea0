package cuda

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestPortProxy plays the kernel's side of a FIFO from the host: a put,
// a signal and a flush, twice around a two-entry ring, and checks the
// copied bytes, the peer's token and the flushed word.
func TestPortProxy(t *testing.T) {
	ctx := setup(t)
	const size = 2
	fifo, s, tok := testHostMem(t, size*32+16), testStream(t), testHostMem(t, 8)
	src, dst := testMalloc(t, 4096), testMalloc(t, 4096)
	want := bytes.Repeat([]byte{1, 2, 3, 4}, 1024)
	if err := MemcpyHtoD(src, want); err != nil {
		t.Fatal(err)
	}
	Memset8(dst, 0, 4096)
	pp, err := NewPortProxy([]ProxyQueue{{FIFO: fifo, Size: size, Stream: s, Remote: []*uint64{tok.Word(0)}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ctx.SetCurrent()
		done <- pp.Run()
	}()
	word := func(i int) *uint64 { return (*uint64)(unsafe.Pointer(&fifo.Bytes[8*i])) }
	seq := uint64(0)
	push := func(kind, ch uint64, a, b, n uint64) {
		// Wait for room, as fifo_push does.
		for seq >= atomic.LoadUint64(word(4*size))+size {
			time.Sleep(time.Microsecond)
		}
		e := int(seq%size) * 4
		atomic.StoreUint64(word(e), a)
		atomic.StoreUint64(word(e+1), b)
		atomic.StoreUint64(word(e+2), n)
		atomic.StoreUint64(word(e+3), kind<<56|ch<<40|(seq+1))
		seq++
	}
	for round := 0; round < 2; round++ {
		push(1, 0, uint64(src), uint64(dst), 4096)
		push(2, 0, 0, 0, 0)
		push(3, 0, 0, 0, 0)
		deadline := time.Now().Add(5 * time.Second)
		// The signal is delivered only after the put before it landed.
		for atomic.LoadUint64(tok.Word(0)) < uint64(round+1) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: token %d, want %d", round, atomic.LoadUint64(tok.Word(0)), round+1)
			}
			time.Sleep(10 * time.Microsecond)
		}
		got := make([]byte, 4096)
		if err := MemcpyDtoH(got, dst); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("round %d: signal delivered before the put's bytes landed", round)
		}
		Memset8(dst, 0, 4096) // the next round's put must land again
		for atomic.LoadUint64(word(4*size+1)) < seq {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: flush not completed (flushed %d, pushed %d)", round, atomic.LoadUint64(word(4*size+1)), seq)
			}
			time.Sleep(10 * time.Microsecond)
		}
		if got := atomic.LoadUint64(tok.Word(0)); got != uint64(round+1) {
			t.Errorf("round %d: token %d, want %d", round, got, round+1)
		}
	}
	// An unknown channel is a failure naming the request.
	push(2, 5, 0, 0, 0)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil after a signal on channel 5")
		}
		t.Log(err)
	case <-time.After(5 * time.Second):
		pp.Stop()
		t.Fatal("Run did not fail on a signal on an unknown channel")
	}
	pp.Free()
}
