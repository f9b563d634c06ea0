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
		ranks  int
		port   bool
		conns  int
		shared bool
		ok     bool
	}{
		{8, false, 1, false, true},  // no port channels: any value
		{2, true, 4, false, false},  // hung on the H200 (5 streams)
		{2, true, 8, false, true},   // ran
		{8, true, 12, false, false}, // hung (17 streams)
		{8, true, 32, false, true},  // the executor's default
		{8, true, 1, true, true},    // SharedQueues
		{1, true, 1, false, false},  // one rank per process, Megatron's setting
	} {
		err := checkQueues(plan(c.ranks, c.port), c.conns, c.shared)
		if (err == nil) != c.ok {
			t.Errorf("%d ranks, port %v, %d queues, shared %v: err %v, want ok=%v", c.ranks, c.port, c.conns, c.shared, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "CUDA_DEVICE_MAX_CONNECTIONS") {
			t.Errorf("error does not name the setting: %v", err)
		}
	}
}
