package msccl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/kernels"
)

// portHandleAt decodes port channel handle i.
func (h *Handles) portHandleAt(i int) (kernels.PortChannelHandle, error) {
	var ph kernels.PortChannelHandle
	b := h.image[i*kernels.PortChannelHandleBytes:]
	return ph, binary.Read(bytes.NewReader(b[:kernels.PortChannelHandleBytes]), binary.LittleEndian, &ph)
}

// fifoMem is the cpu device's FIFO and head word, for a producer on the
// host (kernels.Push).
func (p *portProxy) fifoMem() ([]byte, *atomic.Uint64) { return p.dev.(*hostPort).fifoMem() }

// pushPutSignal pushes, as a kernel's fifo_push would, a put of n bytes
// from src to dst and a signal on port channel 0.
func pushPutSignal(h *Handles, src, dst, n uint64) {
	mem, head := h.port.fifoMem()
	kernels.Push(mem, PortFifoEntries, head, kernels.FifoPut, 0, src, dst, n)
	kernels.Push(mem, PortFifoEntries, head, kernels.FifoSignal, 0, 0, 0, 0)
}

// pushFlush pushes a flush on port channel ch, as a kernel's fifo_flush
// would, and waits until the proxy has published it.
func (h *Handles) pushFlush(ctx context.Context, ch int) error {
	mem, head := h.port.fifoMem()
	seq := kernels.Push(mem, PortFifoEntries, head, kernels.FifoFlush, ch, 0, 0, 0)
	flushed := (*atomic.Uint64)(unsafe.Pointer(&mem[8*(kernels.FifoEntryWords*PortFifoEntries+1)]))
	for flushed.Load() <= seq {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("flushed %d, want > %d: %w", flushed.Load(), seq, err)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// checkUnflushed is nil when err is an *UnflushedError of rank whose
// channels are want, and its message names them as the user reads it.
func checkUnflushed(err error, rank int, want ...UnflushedChannel) error {
	var u *UnflushedError
	if !errors.As(err, &u) || u.Rank != rank || !reflect.DeepEqual(u.Channels, want) {
		return fmt.Errorf("Check: %v, want an UnflushedError of rank %d with %+v", err, rank, want)
	}
	for _, c := range want {
		line := fmt.Sprintf("rank %d channel %d (peer rank %d): %d puts (%d bytes) with no flush after them", rank, c.Channel, c.Peer, c.Puts, c.Bytes)
		if !strings.Contains(err.Error(), line) || !strings.Contains(err.Error(), "flush() before reusing a put's source or ending the kernel") {
			return fmt.Errorf("Check: %q lacks %q or the fix", err, line)
		}
	}
	return nil
}

// A put that no flush on its channel follows is Check's UnflushedError
// once the proxy has served it (naming the rank, channel, peer, puts and
// bytes); a flush in a later "launch" clears it; put, signal and flush
// together are clean.
func TestPortUnflushed(t *testing.T) {
	portPair(t, nil, func(ctx context.Context, rc *RankComm, _ *Buffer, _ *Registration, hs *Handles, h kernels.PortChannelHandle) error {
		r := rc.Rank()
		if err := hs.Check(); err != nil {
			return fmt.Errorf("Check before any request: %v", err)
		}
		// A first launch: two puts, the second with a signal, no flush.
		mem, head := hs.port.fifoMem()
		kernels.Push(mem, PortFifoEntries, head, kernels.FifoPut, 0, h.Src, h.Dst+64, 32)
		pushPutSignal(hs, h.Src, h.Dst, 64)
		if err := checkUnflushed(hs.Check(), r, UnflushedChannel{Channel: 0, Peer: 1 - r, Puts: 2, Bytes: 96, CompletedBy: -1}); err != nil {
			return err
		}
		// A second launch flushes.
		if err := hs.pushFlush(ctx, 0); err != nil {
			return err
		}
		if err := hs.Check(); err != nil {
			return fmt.Errorf("Check after the flush: %v", err)
		}
		// put, signal, flush in one launch.
		pushPutSignal(hs, h.Src, h.Dst, 64)
		if err := hs.pushFlush(ctx, 0); err != nil {
			return err
		}
		if err := hs.Check(); err != nil {
			return fmt.Errorf("Check after put, signal and flush: %v", err)
		}
		return rc.Barrier(ctx)
	})
}

// waitInbound waits until channel i's inbound word reaches v.
func (h *Handles) waitInbound(ctx context.Context, i int, v uint64) error {
	in := h.chans.Chans[i].Inbound
	w := (*atomic.Uint64)(unsafe.Pointer(&in.Mem.(interface{ Bytes() []byte }).Bytes()[in.Off]))
	for w.Load() < v {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("channel %d's semaphore is %d, want %d: %w", i, w.Load(), v, err)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// portPair runs f on two ranks of the cpu device, each with a port
// channel to the other served by h over a registered 4096-byte buffer
// (each byte rank+1), and its handle.
func portPair(t *testing.T, h ProxyHandler, f func(ctx context.Context, rc *RankComm, buf *Buffer, reg *Registration, hs *Handles, ph kernels.PortChannelHandle) error) {
	t.Helper()
	joinRanks(t, 2, func(ctx context.Context, rc *RankComm) error {
		buf, reg, err := registered(ctx, rc, 4096)
		if err != nil {
			return err
		}
		defer buf.Close()
		defer reg.Close()
		hs, err := rc.PortChannels(ctx, []int{1 - rc.Rank()}, reg, reg, h)
		if err != nil {
			return err
		}
		defer hs.Close()
		ph, err := hs.portHandleAt(0)
		if err != nil {
			return err
		}
		return f(ctx, rc, buf, reg, hs, ph)
	})
}

// Port channels on the cpu device: each rank pushes a put, a signal and a
// flush into its FIFO as a kernel's fifo_push would (kernels.Push), its
// proxy hands them to a ProxyCounter around the default handling, and the
// peer sees the data once its semaphore has been raised. A request whose
// address lies outside the registered buffers fails the proxy, and Check
// names it.
func TestPortChannelsCPU(t *testing.T) {
	counter := &ProxyCounter{}
	portPair(t, counter, func(ctx context.Context, rc *RankComm, buf *Buffer, reg *Registration, hs *Handles, h kernels.PortChannelHandle) error {
		r := rc.Rank()
		data := buf.Mem().host
		if h.Sem.Chan.RemoteInbound != 0 || h.Fifo.Size != PortFifoEntries || h.Src != memAddr(buf.mem) || h.Dst != memAddr(reg.r.Peers[1-r]) {
			return fmt.Errorf("handle %+v", h)
		}
		// Bytes [1024, 1088) of the peer's buffer get this rank's.
		pushPutSignal(hs, h.Src, h.Dst+1024, 64)
		if err := hs.pushFlush(ctx, 0); err != nil {
			return err
		}
		if err := hs.waitInbound(ctx, 0, 1); err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		if got := data[1024:1088]; !bytes.Equal(got, bytes.Repeat([]byte{byte(2 - r)}, 64)) || data[1023] != byte(r+1) || data[1088] != byte(r+1) {
			return fmt.Errorf("bytes [1023, 1089) are %v", data[1023:1089])
		}
		// One counter serves both ranks' proxies: the rank's peer is
		// the index of its figures.
		st := counter.Stats()
		if len(st) != 2 || st[1-r].Peer != 1-r || st[1-r].Puts != 1 || st[1-r].Signals != 1 || st[1-r].Bytes != 64 {
			return fmt.Errorf("stats %+v", st)
		}
		if err := rc.Barrier(ctx); err != nil {
			return err
		}
		mem, head := hs.port.fifoMem()
		kernels.Push(mem, PortFifoEntries, head, kernels.FifoPut, 0, h.Src, h.Dst+4090, 64)
		for hs.port.failure() == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("a put past the buffer's end did not fail the proxy")
			}
			time.Sleep(time.Millisecond)
		}
		want := fmt.Sprintf("rank %d's port proxy: request 4: destination: [%#x, +64) is outside the registered buffer", r, h.Dst+4090)
		if err := hs.Check(); err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("Check: %v, want %q", err, want)
		}
		return rc.Barrier(ctx)
	})
}

// A handler that blocks is named by Check once a wait of the kernel has
// timed out (here a flush's watchdog record), and only then: while the
// kernel still waits within its time, the handler may just be slow.
func TestPortBlockingHandlerNamed(t *testing.T) {
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})} // by rank
	blocker := ProxyHandlerFunc(func(t Trigger) TriggerResult {
		<-release[t.Rank]
		return t.Default()
	})
	portPair(t, blocker, func(ctx context.Context, rc *RankComm, _ *Buffer, _ *Registration, hs *Handles, h kernels.PortChannelHandle) error {
		r := rc.Rank()
		defer close(release[r]) // before Close waits for the proxy
		pushPutSignal(hs, h.Src, h.Dst, 64)
		deadline := time.Now().Add(5 * time.Second)
		for hs.port.serving.Busy(0) == "" {
			if time.Now().After(deadline) {
				return fmt.Errorf("the handler never got the put")
			}
			time.Sleep(time.Millisecond)
		}
		if err := hs.Check(); err != nil {
			return fmt.Errorf("Check before any timeout: %v", err)
		}
		hs.timedOut(kernels.WatchFlush, 0, 0, 1-r, 3, 0)
		want := fmt.Sprintf("rank %d's port proxy: proxy handler proxy.HandlerFunc has been serving trigger #1 of rank %d: put on port channel 0 (peer rank %d, 64 bytes)", r, r, 1-r)
		if err := hs.Check(); err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("Check: %v, want %q", err, want)
		}
		return nil
	})
}

// The cuda proxy's signal slots: each is handed out once between two
// waits for its stream, so a queued copy never reads a count raised
// after it was queued.
func TestCountRing(t *testing.T) {
	r := countRing{n: 3}
	for want := range 3 {
		if got, full := r.take(); got != want || full {
			t.Fatalf("take %d: slot %d, full %v", want, got, full)
		}
	}
	if _, full := r.take(); !full {
		t.Fatal("a fourth slot of three")
	}
	r.reset()
	if got, full := r.take(); got != 0 || full {
		t.Fatalf("after reset: slot %d, full %v", got, full)
	}
}

// fifoAt puts the tail and flushed words where kernels.FIFO writes them:
// a pop moves the word at Tail, a flush the word at Flushed.
func TestFifoAt(t *testing.T) {
	const size = 8
	words := make([]uint64, kernels.FIFOBytes(size)/8+1)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), kernels.FIFOBytes(size))
	base := uint64(uintptr(unsafe.Pointer(&words[0])))
	f := fifoAt(base, 0x1000, size)
	q, err := kernels.NewFIFO(mem, size)
	if err != nil {
		t.Fatal(err)
	}
	var head atomic.Uint64
	kernels.Push(mem, size, &head, kernels.FifoSignal, 0, 0, 0, 0)
	if _, ok := q.Pop(); !ok {
		t.Fatal("nothing to pop")
	}
	q.Flushed(7)
	if f.Head != 0x1000 || f.Size != size || words[(f.Tail-base)/8] != 1 || words[(f.Flushed-base)/8] != 7 {
		t.Errorf("fifo %+v: tail word %d, flushed word %d", f, words[(f.Tail-base)/8], words[(f.Flushed-base)/8])
	}
}
