package kernels

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// FIFO is a port channel queue as the kernel's fifo_push writes it
// (abi.go): Size entries of FifoEntryWords words, then the
// tail word (entries the proxy has taken) and the flushed word (requests
// complete), in memory the host reads and writes (mapped host memory, or
// shared memory on the cpu device). One goroutine pops it.
type FIFO struct {
	mem   []byte
	size  uint64
	taken atomic.Uint64 // written by the popping goroutine only; read by reports
}

// FIFOBytes is the size of a FIFO of size entries.
func FIFOBytes(size uint64) int { return int(8 * (FifoEntryWords*size + 2)) }

// NewFIFO reads and writes the queue in mem (zeroed, 8-byte aligned).
func NewFIFO(mem []byte, size uint64) (*FIFO, error) {
	if size == 0 || size&(size-1) != 0 {
		return nil, fmt.Errorf("kernels: FIFO of %d entries: want a power of two", size)
	}
	if len(mem) < FIFOBytes(size) || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("kernels: FIFO of %d entries needs %d aligned bytes, got %d", size, FIFOBytes(size), len(mem))
	}
	return &FIFO{mem: mem, size: size}, nil
}

func (f *FIFO) word(w uint64) *uint64 { return (*uint64)(unsafe.Pointer(&f.mem[8*w])) }

// Entry is one popped request.
type Entry struct {
	Seq            uint64 // from 1
	Kind           uint64 // FifoPut, FifoSignal, FifoFlush
	Chan           int
	Src, Dst, Size uint64
}

// Pop takes the next entry if the kernel has written it: the tag word,
// written last, carries its sequence number, so an entry of the previous
// lap is never taken for a fresh one.
func (f *FIFO) Pop() (Entry, bool) {
	taken := f.taken.Load()
	e := FifoEntryWords * (taken & (f.size - 1))
	seqMask := uint64(1)<<FifoSeqBits - 1
	tag := atomic.LoadUint64(f.word(e + 3))
	if tag == 0 || tag&seqMask != (taken+1)&seqMask {
		return Entry{}, false
	}
	out := Entry{
		Seq: taken + 1, Kind: tag >> FifoKindShift, Chan: int(tag >> FifoChanShift & FifoChanMask),
		Src: atomic.LoadUint64(f.word(e)), Dst: atomic.LoadUint64(f.word(e + 1)), Size: atomic.LoadUint64(f.word(e + 2)),
	}
	atomic.StoreUint64(f.word(e+3), 0)
	f.taken.Store(taken + 1)
	atomic.StoreUint64(f.word(FifoEntryWords*f.size), taken+1)
	return out, true
}

// Taken is how many entries Pop has taken.
func (f *FIFO) Taken() uint64 { return f.taken.Load() }

// Peek is the tag word of the next entry (0: not written), for a hang
// report.
func (f *FIFO) Peek() uint64 {
	return atomic.LoadUint64(f.word(FifoEntryWords*(f.taken.Load()&(f.size-1)) + 3))
}

// Flushed publishes that every request up to seq is complete: a flush
// pushed as request seq returns once this is at least seq.
func (f *FIFO) Flushed(seq uint64) { atomic.StoreUint64(f.word(FifoEntryWords*f.size+1), seq) }

// Push is fifo_push of port_channel.cuh written in Go, over the same
// words: for a host-side producer (and tests of a proxy without a GPU).
// head counts the requests pushed; Push waits while the queue is full.
func Push(mem []byte, size uint64, head *atomic.Uint64, kind uint64, ch int, src, dst, n uint64) uint64 {
	idx := head.Add(1) - 1
	tail := (*uint64)(unsafe.Pointer(&mem[8*FifoEntryWords*size]))
	for idx >= atomic.LoadUint64(tail)+size {
		runtime.Gosched()
	}
	e := 8 * FifoEntryWords * (idx & (size - 1))
	w := func(i uint64) *uint64 { return (*uint64)(unsafe.Pointer(&mem[e+8*i])) }
	atomic.StoreUint64(w(0), src)
	atomic.StoreUint64(w(1), dst)
	atomic.StoreUint64(w(2), n)
	seqMask := uint64(1)<<FifoSeqBits - 1
	atomic.StoreUint64(w(3), kind<<FifoKindShift|uint64(ch)&FifoChanMask<<FifoChanShift|(idx+1)&seqMask)
	return idx
}
