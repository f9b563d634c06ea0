package cudaexec

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

func TestConnections(t *testing.T) {
	for v, want := range map[string]int{"": 8, "x": 8, "0": 8, "-3": 8, "1": 1, " 16 ": 16, "32": 32, "64": 32} {
		t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", v)
		if got := connections(); got != want {
			t.Errorf("CUDA_DEVICE_MAX_CONNECTIONS=%q: %d queues, want %d", v, got, want)
		}
	}
}

func TestCheckQueues(t *testing.T) {
	plan := func(ranks int, port bool) *ir.Plan {
		p := &ir.Plan{Name: "x", GPUs: make([]ir.GPU, ranks)}
		for r := range p.GPUs {
			p.GPUs[r].Channels = []ir.Channel{{Type: ir.ChanMemory}}
			if port {
				p.GPUs[r].Channels = append(p.GPUs[r].Channels, ir.Channel{Type: ir.ChanPort}, ir.Channel{Type: ir.ChanPort})
			}
		}
		return p
	}
	for _, c := range []struct {
		ranks    int
		port     bool
		live     int
		portOpen bool
		conns    int
		shared   bool
		ok       bool
	}{
		{8, false, 0, false, 1, false, true},   // no port channels: any value
		{8, false, 40, false, 32, false, true}, // ... and any number of streams
		{2, true, 0, false, 4, false, false},   // hung on the H200 (5 streams)
		{2, true, 0, false, 8, false, true},    // ran
		{8, true, 0, false, 12, false, false},  // hung (17 streams)
		{8, true, 0, false, 32, false, true},   // the executor's default
		{8, true, 16, false, 32, false, false}, // other executors' streams count
		{8, false, 30, true, 32, false, false}, // a port executor is open
		{8, true, 0, false, 1, true, true},     // SharedQueues
		{1, true, 0, false, 1, false, false},   // one rank per process, Megatron's setting
	} {
		q := needOf(plan(c.ranks, c.port))
		q.live, q.portOpen = c.live, c.portOpen
		err := checkQueues("x", q, c.conns, c.shared)
		if (err == nil) != c.ok {
			t.Errorf("%+v: err %v, want ok=%v", c, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "CUDA_DEVICE_MAX_CONNECTIONS") {
			t.Errorf("error does not name the setting: %v", err)
		}
	}
}
