package kernels

import (
	"sync/atomic"
	"testing"
	"unsafe"
)

// Push and Pop agree on the FIFO's words: entries come out in order with
// their kind, channel and operands, across laps of the ring, and the
// tail word tells the producer the space is free again.
func TestFIFORoundTrip(t *testing.T) {
	const size = 4
	mem := make([]uint64, FIFOBytes(size)/8) // 8-byte aligned
	b := unsafeBytes(mem)
	f, err := NewFIFO(b, size)
	if err != nil {
		t.Fatal(err)
	}
	var head atomic.Uint64
	for lap := range 3 {
		for i := range size {
			n := uint64(lap*size + i)
			Push(b, size, &head, FifoPut, i, 100+n, 200+n, 8*n)
		}
		for i := range size {
			n := uint64(lap*size + i)
			e, ok := f.Pop()
			if !ok || e.Seq != n+1 || e.Kind != FifoPut || e.Chan != i || e.Src != 100+n || e.Dst != 200+n || e.Size != 8*n {
				t.Fatalf("lap %d entry %d: %+v %v", lap, i, e, ok)
			}
		}
		if _, ok := f.Pop(); ok {
			t.Fatalf("lap %d: popped an entry nobody pushed", lap)
		}
	}
	f.Flushed(12)
	if got := mem[FifoEntryWords*size+1]; got != 12 || mem[FifoEntryWords*size] != 12 {
		t.Errorf("tail %d, flushed %d", mem[FifoEntryWords*size], got)
	}
	if _, err := NewFIFO(b, 3); err == nil {
		t.Error("a FIFO of 3 entries was accepted")
	}
	if _, err := NewFIFO(b[:16], size); err == nil {
		t.Error("a FIFO in 16 bytes was accepted")
	}
}

func unsafeBytes(w []uint64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w)) }
