//go:build nvml

package topo_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/msccl-go/msccl-go/internal/golden"
	"github.com/msccl-go/msccl-go/runtime/topo"
	"github.com/msccl-go/msccl-go/runtime/topo/topotest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.topo from the mock machines")

var host = topo.Host{Node: "dgx01", Hostname: "dgx01", Source: topo.NodeEnv}

func discover(t *testing.T, s *server.Server) *topo.Topology {
	t.Helper()
	top, err := topo.DiscoverWith(s, host)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// go-nvml's DGX H100 and H200 mocks, with the board's fabric wired in
// (topotest): eight GPUs, 18 NVLinks each into the switches, every pair
// NV18 and peer-capable, NUMA split 0-3 / 4-7, all memory channels over
// NVLink.
func TestDGX(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *server.Server
		gpu  string
		mib  uint64
	}{
		{"dgxh100", topotest.DGXH100(), "NVIDIA H100 80GB HBM3", 81920},
		{"dgxh200", topotest.DGXH200(), "NVIDIA H200 141GB HBM3e", 144384},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := discover(t, tc.s)
			if len(top.GPUs) != 8 || len(top.Links) != 8 || top.Driver != "550.54.15" {
				t.Fatalf("%d GPUs, %d link rows, driver %q", len(top.GPUs), len(top.Links), top.Driver)
			}
			for i, g := range top.GPUs {
				if g.Index != i || g.Name != tc.gpu || g.Memory != tc.mib<<20 || !strings.HasPrefix(g.UUID, "GPU-") {
					t.Errorf("GPU%d: %+v", i, g)
				}
				if g.NVLinks != 18 || g.SwitchLinks != 18 {
					t.Errorf("GPU%d: %d NVLinks, %d to switches; want 18, 18", i, g.NVLinks, g.SwitchLinks)
				}
				if want := i / 4; g.NUMANode != want || len(g.CPUs) != 112 || g.CPUs[0] != 56*want {
					t.Errorf("GPU%d: NUMA %d with %d CPUs from %d; want node %d", i, g.NUMANode, len(g.CPUs), g.CPUs[0], want)
				}
				if j, ok := top.GPUByBusID(g.BusID); !ok || j != i {
					t.Errorf("GPU%d: bus id %s finds %d", i, g.BusID, j)
				}
				if j, ok := top.GPUByUUID(g.UUID); !ok || j != i {
					t.Errorf("GPU%d: UUID %s finds %d", i, g.UUID, j)
				}
				if peers := top.Peers(i); len(peers) != 7 || slices.Contains(peers, i) {
					t.Errorf("GPU%d: NVLink peers %v", i, peers)
				}
			}
			if got := top.GPUs[4].BusID; got != "00000000:9a:00.0" {
				t.Errorf("GPU4 bus id %q", got)
			}
			for i := range 8 {
				for j := range 8 {
					l := top.Links[i][j]
					tr, err := top.Transport(topo.RankPlace{Node: "dgx01", GPU: i}, topo.RankPlace{Node: "dgx01", GPU: j})
					if err != nil {
						t.Fatal(err)
					}
					if i == j {
						if l.Label() != "X" || tr.Kind != topo.SameGPU {
							t.Errorf("GPU%d self: %s, %v", i, l.Label(), tr)
						}
						continue
					}
					wantDist := topo.DistNode
					if i/4 != j/4 {
						wantDist = topo.DistSys
					}
					if l.Label() != "NV18" || !l.NVSwitch || l.NVLinks != 18 || l.Distance != wantDist {
						t.Errorf("GPU%d-GPU%d: %s %+v", i, j, l.Label(), l)
					}
					if !top.P2P(i, j) || !l.Atomics || !l.P2PNVLink || l.P2PStatus != "" {
						t.Errorf("GPU%d-GPU%d: P2P %+v", i, j, l)
					}
					if tr.Kind != topo.NVLink || !tr.Kind.MemoryChannels() || tr.Reason != "GPU"+strconv.Itoa(i)+" and GPU"+strconv.Itoa(j)+": 18 NVLinks through NVSwitch, peer reads and writes" {
						t.Errorf("GPU%d-GPU%d: %v", i, j, tr)
					}
				}
			}
			goldenTopo(t, tc.name, top.String())
		})
	}
}

type pairCase struct {
	i, j   int
	kind   topo.TransportKind
	reason string
}

// checkTransports checks the transport between ranks on GPUs i and j of
// top's node.
func checkTransports(t *testing.T, top *topo.Topology, cases []pairCase) {
	t.Helper()
	for _, tc := range cases {
		tr, err := top.Transport(topo.RankPlace{Node: host.Node, GPU: tc.i}, topo.RankPlace{Node: host.Node, GPU: tc.j})
		if err != nil || tr.Kind != tc.kind || tr.Reason != tc.reason {
			t.Errorf("GPU%d-GPU%d: %v, %v; want %s: %s", tc.i, tc.j, tr, err, tc.kind, tc.reason)
		}
	}
}

// The PCIe boxes give the other choices: P2P over PCIe under a switch,
// the copy engine across sockets, NVLink bridges between pairs.
func TestPCIeMachines(t *testing.T) {
	at := func(i int) topo.RankPlace { return topo.RankPlace{Node: "dgx01", GPU: i} }
	box := discover(t, topotest.PCIeBox())
	checkTransports(t, box, []pairCase{
		{0, 1, topo.PCIeP2P, "GPU0 and GPU1: peer reads and writes over PCIe (path PIX)"},
		{3, 2, topo.PCIeP2P, "GPU3 and GPU2: peer reads and writes over PCIe (path PIX)"},
		{0, 2, topo.CopyEngine, "GPU0 and GPU2 have no peer access (NVML: IOH topology not supported; path SYS)"},
		{3, 1, topo.CopyEngine, "GPU3 and GPU1 have no peer access (NVML: IOH topology not supported; path SYS)"},
	})
	if tr, _ := box.Transport(at(0), at(2)); tr.Kind.MemoryChannels() {
		t.Error("copy engine offers memory channels")
	}
	for i, g := range box.GPUs {
		if g.NVLinks != 0 || g.NUMANode != i/2 || len(box.Peers(i)) != 0 {
			t.Errorf("PCIe box GPU%d: %+v", i, g)
		}
	}
	goldenTopo(t, "pciebox", box.String())

	pairs := discover(t, topotest.BridgedPairs())
	checkTransports(t, pairs, []pairCase{
		{0, 1, topo.NVLink, "GPU0 and GPU1: 12 NVLinks direct, peer reads and writes"},
		{3, 2, topo.NVLink, "GPU3 and GPU2: 12 NVLinks direct, peer reads and writes"},
		{1, 2, topo.PCIeP2P, "GPU1 and GPU2: peer reads and writes over PCIe (path PHB)"},
	})
	if l := pairs.Links[0][1]; l.Label() != "NV12" || l.NVSwitch || pairs.GPUs[0].SwitchLinks != 0 {
		t.Errorf("bridge: %s %+v", l.Label(), l)
	}
	if got := pairs.Peers(2); !slices.Equal(got, []int{3}) {
		t.Errorf("Peers(2) = %v", got)
	}
}

// Ranks on different nodes, or on one node of the CPU device, whatever
// the GPUs.
func TestTransportAcrossNodes(t *testing.T) {
	top := discover(t, topotest.DGXH100())
	tr, err := top.Transport(topo.RankPlace{Node: "dgx01", GPU: 0}, topo.RankPlace{Node: "dgx02", GPU: 0})
	if err != nil || tr.Kind != topo.Socket || tr.Reason != "different nodes (dgx01 and dgx02)" || tr.Kind.MemoryChannels() {
		t.Errorf("across nodes: %v, %v", tr, err)
	}
	// Another node's pair cannot be judged here, but its ranks can still
	// be told apart from ours.
	if _, err := top.Transport(topo.RankPlace{Node: "dgx02", GPU: 0}, topo.RankPlace{Node: "dgx02", GPU: 1}); err == nil {
		t.Error("judged another node's pair")
	}
	tr, err = top.Transport(topo.RankPlace{Node: "dgx01", GPU: topo.NoGPU}, topo.RankPlace{Node: "dgx01", GPU: topo.NoGPU})
	if err != nil || tr.Kind != topo.SharedMemory || !tr.Kind.MemoryChannels() {
		t.Errorf("CPU device: %v, %v", tr, err)
	}
	if s := tr.String(); s != "shared-memory: CPU-device ranks of one node" {
		t.Errorf("String: %q", s)
	}
}

// Older drivers: NVML without nvmlDeviceGetNumaNodeId (memory affinity
// says the node) and without nvmlDeviceGetNvLinkRemoteDeviceType (a bus
// id that is no GPU is a switch). go-nvml binds lazily, so a missing
// function must not even be called: the process would end.
func TestOldDriver(t *testing.T) {
	old := func(s *server.Server) *server.Server {
		s.LookupSymbolFunc = func(name string) error {
			if name == "nvmlDeviceGetNumaNodeId" || name == "nvmlDeviceGetNvLinkRemoteDeviceType" {
				return errors.New("undefined symbol: " + name)
			}
			return nil
		}
		for _, d := range s.Devices {
			d := d.(*server.Device)
			d.GetNumaNodeIdFunc = func() (int, nvml.Return) {
				t.Error("called the missing nvmlDeviceGetNumaNodeId")
				return 0, nvml.ERROR_FUNCTION_NOT_FOUND
			}
			d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				t.Error("called the missing nvmlDeviceGetNvLinkRemoteDeviceType")
				return 0, nvml.ERROR_FUNCTION_NOT_FOUND
			}
		}
		return s
	}
	top := discover(t, old(topotest.DGXH100()))
	for i, g := range top.GPUs {
		if g.NUMANode != i/4 || g.SwitchLinks != 18 {
			t.Errorf("GPU%d: %+v", i, g)
		}
	}
	if got, _ := os.ReadFile("testdata/dgxh100.topo"); top.String() != string(got) {
		t.Errorf("an old driver's view of the DGX H100 differs from the golden:\n%s", top)
	}
	if l := discover(t, old(topotest.BridgedPairs())).Links[2][3]; l.Label() != "NV12" || l.NVSwitch {
		t.Errorf("bridge without far-end types: %s %+v", l.Label(), l)
	}
	// A driver that has the call but cannot answer it.
	s := topotest.PCIeBox()
	for _, d := range s.Devices {
		d := d.(*server.Device)
		d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	}
	for i, g := range discover(t, s).GPUs {
		if g.NUMANode != -1 {
			t.Errorf("GPU%d: NUMA node %d where NVML knows none", i, g.NUMANode)
		}
	}
}

// NVML failures: a missing library is ErrNoNVML; other failures name the
// call; a query a GPU does not answer leaves its field unknown.
func TestNVMLFailures(t *testing.T) {
	_, err := topo.DiscoverWith(topotest.NoNVML(), host)
	if !errors.Is(err, topo.ErrNoNVML) || err.Error() != "topo: NVML not available: nvmlInit: ERROR_LIBRARY_NOT_FOUND (no NVIDIA driver or libnvidia-ml.so.1 on this machine)" {
		t.Errorf("no library: %v", err)
	}
	if _, err := topo.DiscoverWith(nil, host); !errors.Is(err, topo.ErrNoNVML) {
		t.Errorf("nil interface: %v", err)
	}
	s := topotest.DGXH200()
	s.InitFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN }
	if _, err := topo.DiscoverWith(s, host); err == nil || errors.Is(err, topo.ErrNoNVML) || !strings.Contains(err.Error(), "nvmlInit: ERROR_UNKNOWN") {
		t.Errorf("init failure: %v", err)
	}
	s = topotest.DGXH200()
	s.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
	if _, err := topo.DiscoverWith(s, host); err == nil || !strings.Contains(err.Error(), "nvmlDeviceGetHandleByIndex(0): ERROR_GPU_IS_LOST") {
		t.Errorf("lost GPU: %v", err)
	}
	s = topotest.DGXH200()
	shut := 0
	s.ShutdownFunc = func() nvml.Return { shut++; return nvml.SUCCESS }
	d0 := s.Devices[0].(*server.Device)
	d0.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d0.GetP2PStatusFunc = func(nvml.Device, nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	top := discover(t, s)
	if shut != 1 {
		t.Errorf("NVML shut down %d times, want 1", shut)
	}
	if top.GPUs[0].CPUs != nil || top.P2P(0, 1) || !top.P2P(1, 0) {
		t.Errorf("unanswered queries: %+v, P2P %v %v", top.GPUs[0], top.P2P(0, 1), top.P2P(1, 0))
	}
	tr, err := top.Transport(topo.RankPlace{Node: "dgx01", GPU: 1}, topo.RankPlace{Node: "dgx01", GPU: 0})
	if err != nil || tr.Kind != topo.CopyEngine || !strings.Contains(tr.Reason, "NVML cannot tell (ERROR_NOT_SUPPORTED)") {
		t.Errorf("one-way P2P: %v, %v", tr, err)
	}
}

func goldenTopo(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name+".topo"), []byte(got), *update)
}
