//go:build nvml

package topo_test

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/topo"
	"github.com/msccl-go/msccl-go/runtime/topo/topotest"
)

func loadPeerPlan(t *testing.T, name string) *ir.Plan {
	t.Helper()
	p, _, err := ir.LoadFile("../../testdata/peer-plans/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// places puts rank r on GPU gpus[r] of node nodes[r].
func places(nodes []string, gpus []int) []topo.RankPlace {
	out := make([]topo.RankPlace, len(nodes))
	for r := range nodes {
		out[r] = topo.RankPlace{Node: nodes[r], GPU: gpus[r]}
	}
	return out
}

// The upstream 2x4 reduce-scatter (memory channels within each group of
// four, port channels across) on a DGX H100: on one node every peer is
// NVLink; as two nodes the port peer goes over the socket; split any
// other way, a memory channel would cross nodes and the plan is refused.
func TestPlanTransports(t *testing.T) {
	p := loadPeerPlan(t, "reducescatter_pkt_2x4.json")
	dgx := discover(t, topotest.DGXH100())
	gpus := []int{0, 1, 2, 3, 4, 5, 6, 7}
	one := places([]string{"dgx01", "dgx01", "dgx01", "dgx01", "dgx01", "dgx01", "dgx01", "dgx01"}, gpus)
	got, err := dgx.PlanTransports(p, one, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[1].Kind != topo.NVLink || got[4].Kind != topo.NVLink {
		t.Errorf("one node: %v", got)
	}
	two := places([]string{"dgx01", "dgx01", "dgx01", "dgx01", "dgx02", "dgx02", "dgx02", "dgx02"}, gpus)
	got, err = dgx.PlanTransports(p, two, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got[6].Kind != topo.Socket || got[3].Kind != topo.NVLink || len(got) != 4 {
		t.Errorf("two nodes, rank 2: %v", got)
	}
	wrong := places([]string{"dgx01", "dgx01", "dgx02", "dgx02", "dgx02", "dgx02", "dgx01", "dgx01"}, gpus)
	_, err = dgx.PlanTransports(p, wrong, 0)
	want := `topo: plan reducescatter_pkt: rank 0's memory channel 0 to rank 2 needs peer memory access, which rank 0 ("dgx01"/GPU0) and rank 2 ("dgx02"/GPU2) lack: socket: different nodes (dgx01 and dgx02); use a plan with port channels between them`
	if err == nil || err.Error() != want {
		t.Errorf("memory channel across nodes:\n got %v\nwant %s", err, want)
	}
	// Two processes on one GPU: memory channels within the device.
	shared := places([]string{"h", "h", "h", "h", "h", "h", "h", "h"}, make([]int, 8))
	box := discover(t, topotest.PCIeBox())
	box.Host.Node = "h"
	if got, err := box.PlanTransports(p, shared, 5); err != nil || got[4].Kind != topo.SameGPU || got[1].Kind != topo.SameGPU {
		t.Errorf("one GPU: %v, %v", got, err)
	}
}

// On the PCIe box, memory channels work under a PCIe switch and are
// refused between sockets, with NVML's reason.
func TestPlanTransportsPCIe(t *testing.T) {
	p := loadPeerPlan(t, "allgather_pkt_rppkt_4.json")
	box := discover(t, topotest.PCIeBox())
	box.Host.Node = "box"
	at := places([]string{"box", "box", "box", "box"}, []int{0, 1, 2, 3})
	_, err := box.PlanTransports(p, at, 1)
	if err == nil || !strings.Contains(err.Error(), "rank 1's memory channel") || !strings.Contains(err.Error(), "copy-engine: GPU1 and GPU2 have no peer access (NVML: IOH topology not supported; path SYS)") {
		t.Errorf("memory channel across sockets: %v", err)
	}
	two := loadPeerPlan(t, "allreduce.json")
	got, err := box.PlanTransports(two, at[:2], 0)
	if err != nil || got[1].Kind != topo.PCIeP2P {
		t.Errorf("memory channel under a switch: %v, %v", got, err)
	}
	// Bad input: a place per rank, self in the plan, GPUs of the node.
	for _, c := range []struct {
		places []topo.RankPlace
		self   int
		want   string
	}{
		{at, 0, "has 2 ranks, but 4 places were given"},
		{at[:2], 2, "rank 2 is not in plan"},
		{places([]string{"box", "box"}, []int{0, 9}), 0, "GPU9 is not on this node"},
	} {
		if _, err := box.PlanTransports(two, c.places, c.self); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v self %d: %v, want %q", c.places, c.self, err, c.want)
		}
	}
}

// Switch channels (NVLink multicast) need every rank of the group behind
// one NVSwitch fabric: a DGX yes, bridged pairs no.
func TestPlanTransportsSwitch(t *testing.T) {
	p := loadPeerPlan(t, "allreduce_pipeline.json")
	at := places([]string{"dgx01", "dgx01", "dgx01", "dgx01"}, []int{0, 1, 2, 3})
	if _, err := discover(t, topotest.DGXH200()).PlanTransports(p, at, 3); err != nil {
		t.Errorf("DGX: %v", err)
	}
	_, err := discover(t, topotest.BridgedPairs()).PlanTransports(p, at, 0)
	if err == nil || !strings.Contains(err.Error(), "rank 0's switch channel 0 (group with rank 1) needs NVLink multicast, but rank 0 (\"dgx01\"/GPU0) and rank 1 (\"dgx01\"/GPU1) do not share an NVSwitch") {
		t.Errorf("bridged pairs: %v", err)
	}
}
