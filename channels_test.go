package msccl

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// Memory channels on the cpu device: the handles point at this rank's
// buffer (src, packets), the peer's buffer as mapped here (dst) and the
// paired semaphore words; a watchdog record a kernel wrote is reported
// by Check naming rank, block, wait, channel and peer.
func TestMemoryChannelsCPU(t *testing.T) {
	joinRanks(t, 3, func(ctx context.Context, rc *RankComm) error {
		r := rc.Rank()
		buf, reg, err := registered(ctx, rc, 4096)
		if err != nil {
			return err
		}
		defer buf.Close()
		defer reg.Close()
		var peers []int
		for p := range rc.Size() {
			if p != r {
				peers = append(peers, p, p) // two channels to each peer
			}
		}
		hs, err := rc.MemoryChannels(ctx, peers, reg, reg)
		if err != nil {
			return err
		}
		defer hs.Close()
		if hs.Len() != 4 || len(hs.Bytes()) != 4*int(kernels.MemoryChannelHandleBytes) || hs.Ptr() != 0 {
			return fmt.Errorf("%d handles in %d bytes at %#x", hs.Len(), len(hs.Bytes()), hs.Ptr())
		}
		for i, p := range peers {
			h, err := hs.HandleAt(i)
			if err != nil {
				return err
			}
			ch := hs.chans.Chans[i]
			pm := reg.r.Peers[p]
			switch {
			case h.Src != memAddr(buf.mem) || h.Packets != memAddr(buf.mem):
				return fmt.Errorf("handle %d: src %#x packets %#x, want this rank's buffer %#x", i, h.Src, h.Packets, memAddr(buf.mem))
			case pm == nil || h.Dst != memAddr(pm) || pm.(interface{ Bytes() []byte }).Bytes()[0] != byte(p+1):
				return fmt.Errorf("handle %d: dst %#x is not rank %d's buffer", i, h.Dst, p)
			case h.Sem.Chan.Inbound != locAddr(ch.Inbound) || h.Sem.Chan.RemoteInbound != locAddr(ch.Remote) || h.Sem.Chan.Expected != locAddr(ch.Expected):
				return fmt.Errorf("handle %d: semaphore words %+v, channel %+v", i, h.Sem.Chan, ch)
			case h.Sem.Chan.Peer != int32(p) || h.Sem.Chan.Index != uint32(i) || ch.Partner != partnerOf(r, p, i%2):
				return fmt.Errorf("handle %d: peer %d index %d partner %d", i, h.Sem.Chan.Peer, h.Sem.Chan.Index, ch.Partner)
			case h.Sem.Watch.Rank != uint32(r) || h.Sem.Watch.NRecords != HandleWatchBlocks || h.Sem.Watch.TimeoutNs != uint64(HandleTimeout):
				return fmt.Errorf("handle %d: watch %+v", i, h.Sem.Watch)
			}
		}
		if err := hs.Check(); err != nil {
			return err
		}
		hs.timedOut(kernels.WatchSignal, 5, 1, peers[1], 3, 2)
		want := fmt.Sprintf("rank %d block 5: signal wait on channel 1 (peer rank %d) timed out after 10s: expected 3, saw 2", r, peers[1])
		if err := hs.Check(); err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("Check: %v, want %q", err, want)
		}
		return nil
	})
}

// timedOut writes what block's wait writes when its watchdog fires
// (common.cuh wd_report): a wait of kind what on channel ch for peer,
// expecting expected and seeing seen.
func (h *Handles) timedOut(what kernels.WatchKind, block, ch, peer int, expected, seen uint64) {
	rec := h.watch[block*kernels.WatchBytes:]
	put := func(off int, v uint32) { binary.LittleEndian.PutUint32(rec[off:], v) }
	put(4, uint32(h.c.Rank()))
	put(8, uint32(block))
	put(12, kernels.WatchUserOp)
	put(20, uint32(ch))
	put(24, uint32(peer))
	binary.LittleEndian.PutUint64(rec[32:], expected)
	binary.LittleEndian.PutUint64(rec[40:], seen)
	put(0, uint32(what))
}

// registered is a buffer of size bytes, each byte rank+1, registered
// with the node's ranks.
func registered(ctx context.Context, rc *RankComm, size int64) (*Buffer, *Registration, error) {
	buf, err := rc.AllocBuffer(size)
	if err != nil {
		return nil, nil, err
	}
	for i := range buf.Mem().host {
		buf.Mem().host[i] = byte(rc.Rank() + 1)
	}
	reg, err := rc.Register(ctx, buf.Mem())
	if err != nil {
		buf.Close()
		return nil, nil, err
	}
	return buf, reg, nil
}

// partnerOf is the index, in rank p's list (every other rank twice, in
// rank order), of the k-th channel to rank r.
func partnerOf(r, p, k int) int {
	if r > p {
		r--
	}
	return 2*r + k
}

// Registration refuses memory the device cannot export, on every rank
// alike (rank 0's refusal is rank 1's error too), naming the reason.
func TestRegisterRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		mem  func(b *Buffer) Mem
		want string
	}{
		{"go slice", func(*Buffer) Mem { return HostMem(make([]byte, 64)) }, "rank 0: host memory of this process (a Go slice, or memory from C) cannot be mapped by the other ranks' processes: allocate it with AllocBuffer"},
		{"part", func(b *Buffer) Mem { return HostMem(b.Mem().host[:32]) }, "rank 0: 32 bytes of a 64-byte buffer: register the whole buffer"},
		{"device on cpu", func(*Buffer) Mem { return DeviceMem(0x1000, 64) }, "rank 0: device memory on the cpu device"},
		{"empty", func(*Buffer) Mem { return Mem{} }, "rank 0: the buffer is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			joinRanks(t, 2, func(ctx context.Context, rc *RankComm) error {
				buf, err := rc.AllocBuffer(64)
				if err != nil {
					return err
				}
				defer buf.Close()
				m := buf.Mem()
				if rc.Rank() == 0 {
					m = c.mem(buf)
				}
				reg, err := rc.Register(ctx, m)
				if err == nil {
					reg.Close()
					return fmt.Errorf("registered")
				}
				if !strings.Contains(err.Error(), c.want) {
					return fmt.Errorf("%v, want %q", err, c.want)
				}
				return nil
			})
		})
	}
}

// CompileKernel compiles a kernel that uses every primitive with the
// headers of this build on its include path; a compile error carries
// NVRTC's positioned log; a launch argument of an unsupported type is
// refused naming its position.
func TestCompileKernel(t *testing.T) {
	nvrtctest.Need(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	src, err := os.ReadFile("kernels/testdata/every_call.cu")
	if err != nil {
		t.Fatal(err)
	}
	k, err := CompileKernel(string(src), "every_call", KernelOptions{Arch: "compute_90"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Name() != "every_call" || !strings.Contains(string(k.Image()), ".entry every_call") {
		t.Errorf("image of %s lacks its entry", k.Name())
	}
	_, err = CompileKernel("#include <msccl/msccl.cuh>\nextern \"C\" __global__ void bad(msccl::MemoryChannel* m) { m->nosuch(); }\n", "bad", KernelOptions{Arch: "compute_90"})
	if err == nil || !strings.Contains(err.Error(), `bad.cu(2): error: class "msccl::MemoryChannel" has no member "nosuch"`) {
		t.Errorf("bad kernel: %v", err)
	}
	if err := k.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, uint64(0), "two"); err == nil || !strings.Contains(err.Error(), "argument 1 has type string") {
		t.Errorf("launch with a string: %v", err)
	}
}
