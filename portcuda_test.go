package msccl

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// With this variable set the test binary is one rank of a cuda job
// (portCUDAChild; the value names the handler) before any test runs.
const portRole = "MSCCL_TEST_PORT_ROLE"

func init() {
	if role := os.Getenv(portRole); role != "" {
		os.Exit(portCUDAChild(role))
	}
}

// The trade of port_rounds.cu: words per rank, rounds, threads.
const (
	portWords  = 64 << 10
	portRounds = 8
	portBlock  = 256
)

// portCUDAChild is one rank of a two-rank cuda job: it builds a port
// channel to the other rank served by the default handler ("default")
// or a ProxyCounter around it ("counter"), runs port_rounds and prints
// what the parent checks; exit 3 on failure.
func portCUDAChild(role string) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, err := OpenComm(ctx, CommOptions{Device: "cuda"})
	if err != nil {
		return fail("open", err)
	}
	defer rc.Close()
	r := rc.Rank()
	buf, err := rc.AllocBuffer(2 * 4 * portWords)
	if err != nil {
		return fail("alloc", err)
	}
	defer buf.Close()
	out, err := rc.AllocBuffer(8) // the kernel's two counts
	if err != nil {
		return fail("alloc", err)
	}
	defer out.Close()
	reg, err := rc.Register(ctx, buf.Mem())
	if err != nil {
		return fail("register", err)
	}
	defer reg.Close()
	var h ProxyHandler
	counter := &ProxyCounter{}
	if role == "counter" {
		h = counter
	}
	ch, err := rc.PortChannels(ctx, []int{1 - r}, reg, reg, h)
	if err != nil {
		return fail("port channels", err)
	}
	defer ch.Close()
	ph, err := ch.portHandleAt(0)
	if err != nil {
		return fail("handle", err)
	}
	fmt.Printf("rank %d: handle %v\n", r, ph.Fifo.Size == PortFifoEntries && ph.Src == uint64(buf.DevicePtr()) && ph.Dst == memAddr(reg.r.Peers[1-r]) && ph.Sem.Chan.RemoteInbound == 0 && ph.Fifo.Tail == ph.Fifo.Entries+8*4*PortFifoEntries)
	if role == "unflushed" {
		if err := portUnflushedRun(rc, ch); err != nil {
			return fail("unflushed", err)
		}
		if err := rc.Barrier(ctx); err != nil {
			return fail("barrier", err)
		}
		return 0
	}
	k, err := portKernel("port_rounds", "")
	if err != nil {
		return fail("compile", err)
	}
	var bad [8]byte
	last := make([]byte, 4*portWords)
	err = rc.Do(func() error {
		if err := k.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{portBlock, 1, 1}, ch, buf.DevicePtr(), uint64(portWords), int32(r), int32(portRounds), out.DevicePtr()); err != nil {
			return err
		}
		if err := cuda.StreamOf(0).Synchronize(); err != nil {
			return err
		}
		if err := cuda.MemcpyDtoH(bad[:], out.DevicePtr()); err != nil {
			return err
		}
		return cuda.MemcpyDtoH(last, buf.DevicePtr()+4*portWords)
	})
	if err != nil {
		return fail("run", err)
	}
	if err := ch.Check(); err != nil {
		return fail("check", err)
	}
	fmt.Printf("rank %d: %d words wrong, %d waits ended by the watchdog\n", r, binary.LittleEndian.Uint32(bad[:]), binary.LittleEndian.Uint32(bad[4:]))
	fmt.Printf("rank %d: last round's words from rank %d: %v\n", r, 1-r, portLastRound(last, 1-r))
	if role == "counter" {
		for _, s := range counter.Stats() {
			fmt.Printf("rank %d: peer %d: %d puts, %d signals, %d bytes\n", r, s.Peer, s.Puts, s.Signals, s.Bytes)
		}
	}
	if err := rc.Barrier(ctx); err != nil {
		return fail("barrier", err)
	}
	return 0
}

// portLastRound reports whether b holds what rank `from` sent in the
// last round of port_rounds.cu.
func portLastRound(b []byte, from int) bool {
	for i := range portWords {
		want := uint32(from+1)<<24 | uint32(portRounds-1)<<16 | uint32(i&0xffff)
		if binary.LittleEndian.Uint32(b[4*i:]) != want {
			return false
		}
	}
	return true
}

// portUnflushedRun launches port_unflushed twice on one block: a put
// that no flush follows, which Check must report as an UnflushedError
// naming this rank, channel 0 and the peer; then a flush alone (a later
// launch flushing on purpose), after which Check must be clean.
func portUnflushedRun(rc *RankComm, ch *Handles) error {
	r := rc.Rank()
	k, err := portKernel("port_unflushed", "")
	if err != nil {
		return err
	}
	launch := func(put, flush int32) error {
		return rc.Do(func() error {
			if err := k.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, ch, put, flush); err != nil {
				return err
			}
			return cuda.StreamOf(0).Synchronize()
		})
	}
	if err := launch(1, 0); err != nil {
		return err
	}
	if err := checkUnflushed(ch.Check(), r, UnflushedChannel{Channel: 0, Peer: 1 - r, Puts: 1, Bytes: 64, CompletedBy: -1}); err != nil {
		return err
	}
	fmt.Printf("rank %d: put without flush reported\n", r)
	if err := launch(0, 1); err != nil {
		return err
	}
	fmt.Printf("rank %d: Check after the flush: %v\n", r, ch.Check())
	return nil
}

// portKernel compiles testdata/kernels/name.cu's entry point name.
func portKernel(name, arch string) (*Kernel, error) {
	src, err := os.ReadFile("testdata/kernels/" + name + ".cu")
	if err != nil {
		return nil, err
	}
	return CompileKernel(string(src), name, KernelOptions{Arch: arch})
}

// The kernels of the cuda tests compile with this build's headers (no
// GPU needed: NVRTC only).
func TestPortRoundsCompiles(t *testing.T) {
	nvrtctest.Need(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, name := range []string{"port_rounds", "port_unflushed"} {
		k, err := portKernel(name, "compute_90")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(k.Image()), ".entry "+name) {
			t.Errorf("PTX lacks %s", name)
		}
	}
}

// Port channels in a user's kernel on the cuda device, two ranks as two
// processes (sharing a GPU round-robin; under MPS they run at once):
// putWithSignal, wait and flush for several rounds, each round's data
// checked by the receiving kernel and the last round's by the host, with
// the built-in handler and with a ProxyCounter around it (one put, two
// signals per round). Skips without CUDA.
func TestPortChannelsCUDAProcs(t *testing.T) {
	spawnsOn(t, "cuda")
	for _, role := range []string{"default", "counter"} {
		t.Run(role, func(t *testing.T) {
			spawnChecked(t, 2, portRole+"="+role, 90*time.Second, func(r int) []string {
				want := []string{
					fmt.Sprintf("rank %d: handle true", r),
					fmt.Sprintf("rank %d: 0 words wrong, 0 waits ended by the watchdog", r),
					fmt.Sprintf("rank %d: last round's words from rank %d: true", r, 1-r),
				}
				if role == "counter" {
					want = append(want, fmt.Sprintf("rank %d: peer %d: %d puts, %d signals, %d bytes", r, 1-r, portRounds, 2*portRounds, portRounds*4*portWords))
				}
				return want
			})
		})
	}
}

// A kernel that puts on a port channel and ends without a flush
// (port_unflushed.cu): Check names the rank, channel and peer as an
// UnflushedError, and a later launch's flush clears it, with two ranks
// as two processes. Skips without CUDA.
func TestPortUnflushedCUDAProcs(t *testing.T) {
	spawnsOn(t, "cuda")
	spawnChecked(t, 2, portRole+"=unflushed", 90*time.Second, func(r int) []string {
		return []string{
			fmt.Sprintf("rank %d: handle true", r),
			fmt.Sprintf("rank %d: put without flush reported", r),
			fmt.Sprintf("rank %d: Check after the flush: <nil>", r),
		}
	})
}
