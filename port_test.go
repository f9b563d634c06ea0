package msccl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
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

// pushPutSignal pushes, as a kernel's fifo_push would, a put of n bytes
// from src to dst and a signal on port channel 0.
func pushPutSignal(h *Handles, src, dst, n uint64) {
	mem, head := h.port.fifoMem()
	kernels.Push(mem, PortFifoEntries, head, kernels.FifoPut, 0, src, dst, n)
	kernels.Push(mem, PortFifoEntries, head, kernels.FifoSignal, 0, 0, 0, 0)
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

// Port channels on the cpu device: each rank pushes a put, a signal and a
// flush into its FIFO as a kernel's fifo_push would (kernels.Push), its
// proxy hands them to a ProxyCounter around the default handling, and the
// peer sees the data once its semaphore has been raised. A request whose
// address lies outside the registered buffers fails the proxy, and Check
// names it.
func TestPortChannelsCPU(t *testing.T) {
	joinRanks(t, 2, func(ctx context.Context, rc *RankComm) error {
		r := rc.Rank()
		buf, reg, err := registered(ctx, rc, 4096)
		if err != nil {
			return err
		}
		defer buf.Close()
		defer reg.Close()
		data := buf.Mem().host
		counter := &ProxyCounter{}
		hs, err := rc.PortChannels(ctx, []int{1 - r}, reg, reg, counter)
		if err != nil {
			return err
		}
		defer hs.Close()
		h, err := hs.portHandleAt(0)
		if err != nil {
			return err
		}
		if h.Sem.Chan.RemoteInbound != 0 || h.Fifo.Size != PortFifoEntries || h.Src != memAddr(buf.mem) || h.Dst != memAddr(reg.r.Peers[1-r]) {
			return fmt.Errorf("handle %+v", h)
		}
		// Bytes [1024, 1088) of the peer's buffer get this rank's.
		pushPutSignal(hs, h.Src, h.Dst+1024, 64)
		mem, head := hs.port.fifoMem()
		flush := kernels.Push(mem, PortFifoEntries, head, kernels.FifoFlush, 0, 0, 0, 0)
		flushed := (*atomic.Uint64)(unsafe.Pointer(&mem[8*(kernels.FifoEntryWords*PortFifoEntries+1)]))
		if err := hs.waitInbound(ctx, 0, 1); err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		for flushed.Load() <= flush {
			if time.Now().After(deadline) {
				return fmt.Errorf("flushed %d, want > %d", flushed.Load(), flush)
			}
			time.Sleep(time.Millisecond)
		}
		if got := data[1024:1088]; !bytes.Equal(got, bytes.Repeat([]byte{byte(2 - r)}, 64)) || data[1023] != byte(r+1) || data[1088] != byte(r+1) {
			return fmt.Errorf("bytes [1023, 1089) are %v", data[1023:1089])
		}
		st := counter.Stats()
		if len(st) != 1 || st[0].Peer != 1-r || st[0].Puts != 1 || st[0].Signals != 1 || st[0].Bytes != 64 {
			return fmt.Errorf("stats %+v", st)
		}
		if err := rc.Barrier(ctx); err != nil {
			return err
		}
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
