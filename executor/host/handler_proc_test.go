package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// With this variable set the test binary is one rank of a job
// (handlerChild) instead of running tests: TestProxyHandlerProcs spawns
// it with the handler to use ("count", "add", "panic").
const handlerRole = "MSCCL_TEST_HANDLER_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(handlerRole); role != "" {
		os.Exit(handlerChild(role))
	}
	os.Exit(m.Run())
}

// handlerChild runs portAllgather once in this process, one rank of a
// job over the cpu device, with the role's handler; it prints what the
// parent checks and exits 3 when the run fails.
func handlerChild(role string) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 3
	}
	ctx := context.Background()
	cfg, err := bootstrap.FromEnv()
	if err != nil {
		return fail("env", err)
	}
	bs, err := bootstrap.Connect(ctx, cfg)
	if err != nil {
		return fail("bootstrap", err)
	}
	c, err := comm.New(ctx, bs, cpudev.Device{}, comm.Options{Timeout: cfg.Timeout})
	if err != nil {
		bs.Close()
		return fail("comm", err)
	}
	defer c.Close()
	var h proxyapi.Handler
	counter := &proxyapi.Counter{}
	switch role {
	case "count":
		h = counter
	case "add":
		h = &proxyapi.AddF32{}
	case "panic":
		if c.Rank() == 0 {
			h = proxyapi.HandlerFunc(func(proxyapi.Trigger) proxyapi.Result { panic("handler bug") })
		}
	}
	p, err := compilePort()
	if err != nil {
		return fail("compile", err)
	}
	ex, err := Open(ctx, c, p, Options{Timeout: time.Second, ProxyHandler: h})
	if err != nil {
		return fail("open", err)
	}
	b, err := ex.Alloc(ctx, 1024)
	if err != nil {
		ex.Close()
		return fail("alloc", err)
	}
	putF32s(b.Input(), float32(c.Rank()+2))
	putF32s(b.Output(), 1)
	err = errors.Join(ex.Run(ctx, b, cpu.F32, ir.ReduceSum))
	out := append([]byte(nil), b.Output()...)
	if err = errors.Join(err, b.Free(), ex.Close()); err != nil {
		return fail("run", err)
	}
	r := c.Rank()
	own, peer := out[r*512:(r+1)*512], out[(1-r)*512:(2-r)*512]
	fmt.Printf("own %v copied %v added %v\n", allF32(own, float32(r+2)), allF32(peer, float32(1-r+2)), allF32(peer, float32(1-r+2)+1))
	for _, s := range counter.Stats() {
		fmt.Printf("peer %d bytes %d puts %d signals %d\n", s.Peer, s.Bytes, s.Puts, s.Signals)
	}
	return 0
}

// The handler interface across processes: two ranks, each its own
// process on the cpu device, their port channels served by the role's
// handler in each process.
func TestProxyHandlerProcs(t *testing.T) {
	for _, c := range []struct {
		role string
		exit [2]int
		out  [2]string // stdout (count, add) or stderr (panic) must contain
	}{
		{"count", [2]int{0, 0}, [2]string{"own true copied true added false\npeer 1 bytes 512 puts 1 signals", "own true copied true added false\npeer 0 bytes 512 puts 1 signals"}},
		{"add", [2]int{0, 0}, [2]string{"own true copied false added true", "own true copied false added true"}},
		{"panic", [2]int{3, 3}, [2]string{"proxy handler proxy.HandlerFunc panicked on trigger #1 of rank 0", "waits for signal #1 on port channel 0 of rank 1 (peer rank 0), 0 arrived"}},
	} {
		t.Run(c.role, func(t *testing.T) {
			var mu sync.Mutex
			stdout, stderr := make([]bytes.Buffer, 2), make([]bytes.Buffer, 2)
			start := time.Now()
			job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{
				N: 2, Argv: []string{""}, KeepGoing: true, Timeout: 30 * time.Second,
				RankEnv: func(int) []string { return []string{handlerRole + "=" + c.role} },
				Stdout:  func(r int) io.Writer { return lockedBuf{&mu, &stdout[r]} },
				Stderr:  func(r int) io.Writer { return lockedBuf{&mu, &stderr[r]} },
			})
			if err != nil {
				t.Fatal(err)
			}
			st, _ := job.Wait()
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
			mu.Lock()
			defer mu.Unlock()
			for r, s := range st {
				got := stdout[r].String()
				if c.exit[r] != 0 {
					got = stderr[r].String()
				}
				if s.ExitCode != c.exit[r] || !strings.Contains(got, c.out[r]) {
					t.Errorf("rank %d: %v, stdout %q, stderr %q: want exit %d and %q", r, s, stdout[r].String(), stderr[r].String(), c.exit[r], c.out[r])
				}
			}
		})
	}
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
