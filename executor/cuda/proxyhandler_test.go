package cudaexec

import (
	"os"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/compiler"
	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
)

// portAllgather is internal/proxy/testdata/port_allgather.msccl: each
// rank puts its input into its peer's output over a port channel.
func portAllgather() ([]byte, error) {
	return os.ReadFile("../../internal/proxy/testdata/port_allgather.msccl")
}

// A ProxyHandler serves the port channels from Go (handlerProxy): a
// Counter around the default handling leaves every result as the CPU
// executor computes it and sees each rank's puts to its peer.
func TestGPUProxyHandler(t *testing.T) {
	needGPU(t)
	src, err := portAllgather()
	if err != nil {
		t.Fatal(err)
	}
	p, _, ds := compiler.CompileSource("port_allgather.msccl", src, nil, compiler.Options{})
	if ds.HasErrors() {
		t.Fatal(ds.String())
	}
	c := &proxyapi.Counter{}
	checkCasesWith(t, "port_allgather", p, matrix(p), Options{Timeout: 3 * time.Second, PortCopy: PortCopyProxy, ProxyHandler: c})
	st := c.Stats()
	if len(st) != 2 {
		t.Fatalf("stats %+v, want both ranks' peers", st)
	}
	for _, s := range st {
		if s.Puts == 0 || s.Bytes == 0 || s.Signals == 0 {
			t.Errorf("peer %d: %+v", s.Peer, s)
		}
		t.Logf("peer %d: %d triggers, %d puts, %d signals, %d bytes, mean %v, max %v", s.Peer, s.Triggers, s.Puts, s.Signals, s.Bytes, s.Total/time.Duration(s.Triggers), s.Max)
	}
}
