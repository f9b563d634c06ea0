package msccl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

// With this variable set the test binary is one rank of a job
// (channelsChild) before any test runs: TestChannelsProcs spawns it.
// init, not TestMain, so that the package's TestMain stays the one of
// rank_test.go.
const channelsRole = "MSCCL_TEST_CHANNELS_ROLE"

func init() {
	if role := os.Getenv(channelsRole); role != "" {
		os.Exit(channelsChild(role))
	}
}

// channelsChild is one rank of a cpu-device job in its own process: rank
// 0 first offers a Go slice to Register (every rank must see the
// refusal), then every rank registers a shared buffer, builds memory
// channels to every other rank and port channels to the next, pushes a
// put and a signal into its FIFO and waits for its predecessor's. It
// prints what the parent checks; exit 3 on failure.
func channelsChild(string) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc, err := OpenComm(ctx, CommOptions{Device: "cpu"})
	if err != nil {
		return fail("open", err)
	}
	defer rc.Close()
	r, n := rc.Rank(), rc.Size()
	buf, err := rc.AllocBuffer(4096)
	if err != nil {
		return fail("alloc", err)
	}
	defer buf.Close()
	m := buf.Mem()
	if r == 0 {
		m = HostMem(make([]byte, 4096))
	}
	if _, err := rc.Register(ctx, m); err != nil {
		fmt.Println("refused:", err)
	} else {
		return fail("register", fmt.Errorf("a Go slice was registered"))
	}
	for i := range buf.Mem().host {
		buf.Mem().host[i] = byte(r + 1)
	}
	reg, err := rc.Register(ctx, buf.Mem())
	if err != nil {
		return fail("register", err)
	}
	defer reg.Close()
	var peers []int
	for p := range n {
		if p != r {
			peers = append(peers, p)
		}
	}
	mc, err := rc.MemoryChannels(ctx, peers, reg, reg)
	if err != nil {
		return fail("memory channels", err)
	}
	defer mc.Close()
	next, prev := (r+1)%n, (r+n-1)%n
	pc, err := rc.PortChannels(ctx, []int{next, prev}, reg, reg, nil)
	if err != nil {
		return fail("port channels", err)
	}
	defer pc.Close()
	h, err := pc.portHandleAt(0)
	if err != nil {
		return fail("handle", err)
	}
	// The put's source is a region no peer writes: from offset 0 it would
	// race rank 0's put into [0, 64) of rank 1, which then could forward
	// rank 0's bytes as its own.
	pushPutSignal(pc, h.Src+2048, h.Dst+uint64(64*r), 64)
	// Channel 1 (to prev) pairs with prev's channel 0 (to its next: us).
	if err := pc.waitInbound(ctx, 1, 1); err != nil {
		return fail("wait", err)
	}
	got := buf.Mem().host[64*prev : 64*prev+64]
	fmt.Printf("rank %d got %v from rank %d\n", r, bytes.Equal(got, bytes.Repeat([]byte{byte(prev + 1)}, 64)), prev)
	// No flush followed the put: Check says so. A flush on channel 1
	// completes it but is not the put's channel's; one on channel 0 is.
	put := UnflushedChannel{Channel: 0, Peer: next, Puts: 1, Bytes: 64, CompletedBy: -1}
	if err := checkUnflushed(pc.Check(), r, put); err != nil {
		return fail("unflushed", err)
	}
	if err := pc.pushFlush(ctx, 1); err != nil {
		return fail("flush", err)
	}
	put.CompletedBy = 1
	checked := pc.Check()
	if err := checkUnflushed(checked, r, put); err != nil {
		return fail("unflushed after a flush on channel 1", err)
	}
	if !strings.Contains(checked.Error(), "a later flush on channel 1 completed them") {
		return fail("unflushed after a flush on channel 1", checked)
	}
	if err := pc.pushFlush(ctx, 0); err != nil {
		return fail("flush", err)
	}
	fmt.Printf("rank %d: unflushed put reported, then cleared by its channel's flush: %v\n", r, pc.Check())
	if err := rc.Barrier(ctx); err != nil {
		return fail("barrier", err)
	}
	return 0
}

// Registration refusals, memory and port channels across processes on
// the cpu device: three ranks, each its own process.
func TestChannelsProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	spawnChecked(t, 3, channelsRole+"=run", 30*time.Second, func(r int) []string {
		return []string{
			"refused: msccl: Register refused: rank 0: host memory of this process (a Go slice, or memory from C) cannot be mapped by the other ranks' processes",
			fmt.Sprintf("rank %d got true from rank %d", r, (r+2)%3),
			fmt.Sprintf("rank %d: unflushed put reported, then cleared by its channel's flush: <nil>", r),
		}
	})
}

// spawnChecked runs n ranks of this test binary as processes with env
// (VAR=value) set and checks that each exits 0 having printed every line
// of want(rank).
func spawnChecked(t *testing.T, n int, env string, timeout time.Duration, want func(r int) []string) {
	t.Helper()
	var mu sync.Mutex
	stdout, stderr := make([]bytes.Buffer, n), make([]bytes.Buffer, n)
	job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{
		N: n, Argv: []string{""}, KeepGoing: true, Timeout: timeout,
		RankEnv: func(int) []string { return []string{env} },
		Stdout:  func(r int) io.Writer { return lockedWriter{&mu, &stdout[r]} },
		Stderr:  func(r int) io.Writer { return lockedWriter{&mu, &stderr[r]} },
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := job.Wait()
	mu.Lock()
	defer mu.Unlock()
	for r, s := range st {
		out := stdout[r].String()
		t.Logf("rank %d: %s", r, strings.TrimSpace(out))
		for _, w := range want(r) {
			if s.ExitCode != 0 || !strings.Contains(out, w) {
				t.Errorf("rank %d: %v, stdout %q, stderr %q: want %q", r, s, out, stderr[r].String(), w)
			}
		}
	}
}
