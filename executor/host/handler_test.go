package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// portAllgather is internal/proxy/testdata/port_allgather.msccl: each
// rank puts its input into its peer's output over a port channel.
func portAllgather() ([]byte, error) {
	return os.ReadFile("../../internal/proxy/testdata/port_allgather.msccl")
}

func portPlan(t *testing.T) *ir.Plan {
	t.Helper()
	p, err := compilePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// compilePort is portPlan for a child process, which has no testing.T.
func compilePort() (*ir.Plan, error) {
	src, err := portAllgather()
	if err != nil {
		return nil, err
	}
	p, _, ds := compiler.CompileSource("port_allgather.msccl", src, nil, compiler.Options{})
	if ds.HasErrors() {
		return nil, fmt.Errorf("%s", ds.String())
	}
	for _, g := range p.GPUs {
		if len(g.FlatChannels(ir.ChanPort)) == 0 {
			return nil, fmt.Errorf("gpus[%d] has no port channel: the test would not reach the proxy", g.ID)
		}
	}
	return p, nil
}

func putF32s(b []byte, v float32) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
}

func allF32(b []byte, want float32) bool {
	for i := 0; i+4 <= len(b); i += 4 {
		if math.Float32frombits(binary.LittleEndian.Uint32(b[i:])) != want {
			return false
		}
	}
	return true
}

// runPort runs the plan once per rank with handlers[r] (before: fills
// the rank's buffers) and returns each rank's error and output.
func runPort(t *testing.T, handlers []proxyapi.Handler, timeout time.Duration, before func(r int, b *Buffers)) ([]error, [][]byte) {
	t.Helper()
	p := portPlan(t)
	outs := make([][]byte, 2)
	var mu sync.Mutex
	errs := ranks(t, 2, 20*time.Second, func(ctx context.Context, c *comm.Comm) error {
		r := c.Rank()
		ex, err := Open(ctx, c, p, Options{Timeout: timeout, ProxyHandler: handlers[r]})
		if err != nil {
			return err
		}
		b, err := ex.Alloc(ctx, 1024)
		if err != nil {
			ex.Close()
			return err
		}
		before(r, b)
		err = ex.Run(ctx, b, cpu.F32, ir.ReduceSum)
		mu.Lock()
		outs[r] = append([]byte(nil), b.Output()...)
		mu.Unlock()
		return errors.Join(err, b.Free(), ex.Close())
	})
	return errs, outs
}

// A Counter around the default handler leaves the result alone and sees
// one put with signal of 512 bytes to the peer.
func TestProxyHandlerCounts(t *testing.T) {
	cs := []*proxyapi.Counter{{}, {Next: proxyapi.DefaultHandler{}}}
	errs, outs := runPort(t, []proxyapi.Handler{cs[0], cs[1]}, 5*time.Second, func(r int, b *Buffers) { putF32s(b.Input(), float32(r+2)) })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if !allF32(outs[r][:512], 2) || !allF32(outs[r][512:], 3) {
			t.Errorf("rank %d: output is not [2..., 3...]", r)
		}
		st := cs[r].Stats()
		if len(st) != 1 || st[0].Peer != 1-r || st[0].Bytes != 512 || st[0].Puts != 1 || st[0].Signals < 1 {
			t.Errorf("rank %d: stats %+v, want one put of 512 bytes to peer %d with a signal", r, st, 1-r)
		}
	}
}

// AddF32 does what the default cannot: the peer's chunk is added to what
// the output held (1.0) instead of overwriting it.
func TestProxyHandlerAdds(t *testing.T) {
	errs, outs := runPort(t, []proxyapi.Handler{&proxyapi.AddF32{}, &proxyapi.AddF32{}}, 5*time.Second, func(r int, b *Buffers) {
		putF32s(b.Input(), float32(r+2))
		putF32s(b.Output(), 1)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		own, peer := outs[r][r*512:(r+1)*512], outs[r][(1-r)*512:(2-r)*512]
		if !allF32(own, float32(r+2)) || !allF32(peer, float32(1-r+2)+1) {
			t.Errorf("rank %d: own chunk %v, peer chunk %v; want %d and %d", r, own[:4], peer[:4], r+2, 1-r+3)
		}
	}
}

// A handler that panics fails its rank's run with the panic, the handler
// and the trigger (the plan's first: the "ready" signal) named; the peer, whose signal never comes, ends by the
// watchdog. Nothing hangs.
func TestProxyHandlerPanics(t *testing.T) {
	boom := proxyapi.HandlerFunc(func(proxyapi.Trigger) proxyapi.Result { panic("handler bug") })
	start := time.Now()
	errs, _ := runPort(t, []proxyapi.Handler{boom, nil}, 500*time.Millisecond, func(r int, b *Buffers) {})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "proxy handler proxy.HandlerFunc panicked on trigger #1 of rank 0: signal on port channel 0 (peer rank 1, 0 bytes): handler bug") {
		t.Errorf("rank 0: %v", errs[0])
	}
	var h *HangError
	if !errors.As(errs[1], &h) {
		t.Errorf("rank 1: %v, want the watchdog's report", errs[1])
	}
}

// A handler that blocks is named by the watchdog of the flush that waits
// for it, and Free and Close give up on it instead of hanging.
func TestProxyHandlerBlocks(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stuck := proxyapi.HandlerFunc(func(t proxyapi.Trigger) proxyapi.Result {
		<-release
		return t.Default()
	})
	start := time.Now()
	errs, _ := runPort(t, []proxyapi.Handler{stuck, nil}, 500*time.Millisecond, func(r int, b *Buffers) {})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	var h *HangError
	if !errors.As(errs[0], &h) {
		t.Fatalf("rank 0: %v, want the watchdog's report", errs[0])
	}
	for _, want := range []string{"proxy handler proxy.HandlerFunc has been serving trigger #1 of rank 0: signal on port channel 0", "port proxy did not finish within 500ms", "port proxy did not stop within 500ms"} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Errorf("rank 0's error lacks %q:\n%v", want, errs[0])
		}
	}
}
