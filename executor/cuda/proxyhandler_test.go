package cudaexec

import (
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/compiler"
	proxyapi "github.com/msccl-go/msccl-go/internal/proxy"
)

// portAllgather puts each rank's input into its peer's output over a
// port channel (the plan places the two ranks on two nodes; the executor
// runs both in this process, so the proxy serves them).
const portAllgather = `collective allgather chunks 1
param nodes = 2
param ranks = 2
for r in 0..ranks {
  copy rank(r).input[0] -> rank(1 - r).output[r] tb 0
  copy rank(r).input[0] -> rank(r).output[r] tb 0
}
`

// A ProxyHandler serves the port channels from Go (handlerProxy): a
// Counter around the default handling leaves every result as the CPU
// executor computes it and sees each rank's puts to its peer.
func TestGPUProxyHandler(t *testing.T) {
	needGPU(t)
	p, _, ds := compiler.CompileSource("port_allgather.msccl", []byte(portAllgather), nil, compiler.Options{})
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
