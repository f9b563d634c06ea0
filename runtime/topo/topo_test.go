package topo

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// twoPlusOne: GPU0 and GPU1 bonded by 18 NVLinks, GPU2 across the SMP link.
func twoPlusOne() *Topology {
	nv := Link{Distance: DistSys, NVLinks: 18, P2PRead: true, P2PWrite: true, Atomics: true, P2PNVLink: true}
	sys := Link{Distance: DistSys, P2PStatus: "IOH topology not supported"}
	self := Link{Distance: DistSelf, P2PRead: true, P2PWrite: true}
	return &Topology{
		Host:   Host{Node: "n0"},
		Driver: "580.00",
		GPUs: []GPU{
			{Index: 0, Name: "NVIDIA H200", BusID: "00000000:18:00.0", NUMANode: 0, NVLinks: 18},
			{Index: 1, Name: "NVIDIA H200", BusID: "00000000:2a:00.0", NUMANode: 0, NVLinks: 18},
			{Index: 2, Name: "NVIDIA H200", BusID: "00000000:9a:00.0", NUMANode: -1},
		},
		Links: [][]Link{{self, nv, sys}, {nv, self, sys}, {sys, sys, self}},
	}
}

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		link Link
		want string
	}{
		{Link{Distance: DistSelf}, "X"},
		{Link{Distance: DistSys, NVLinks: 4}, "NV4"},
		{Link{Distance: DistNode, NVSwitch: true}, "NV"},
		{Link{Distance: DistPIX}, "PIX"},
		{Link{Distance: DistPXB}, "PXB"},
		{Link{Distance: DistPHB}, "PHB"},
		{Link{Distance: DistNode}, "NODE"},
		{Link{Distance: DistSys}, "SYS"},
		{Link{}, "?"},
		{Link{Distance: Distance(99)}, "Distance(99)"},
	} {
		if got := tc.link.Label(); got != tc.want {
			t.Errorf("%+v: label %q, want %q", tc.link, got, tc.want)
		}
	}
}

func TestQueries(t *testing.T) {
	top := twoPlusOne()
	for _, tc := range []struct {
		i, j int
		p2p  bool
	}{
		{0, 0, true}, {0, 1, true}, {1, 0, true}, {0, 2, false}, {2, 1, false}, {-1, 0, false}, {0, 7, false}, {7, 7, false},
	} {
		if got := top.P2P(tc.i, tc.j); got != tc.p2p {
			t.Errorf("P2P(%d,%d) = %v", tc.i, tc.j, got)
		}
	}
	for i, want := range [][]int{{1}, {0}, nil} {
		if got := top.Peers(i); !slices.Equal(got, want) {
			t.Errorf("Peers(%d) = %v, want %v", i, got, want)
		}
	}
	if top.Peers(5) != nil {
		t.Error("Peers out of range")
	}
	for _, tc := range []struct {
		bus  string
		want int
	}{
		{"00000000:2a:00.0", 1}, {"0000:2A:00.0", 1}, {PCIBusID(0, 0x9a, 0), 2}, {"0000:3b:00.0", -1}, {"", -1},
	} {
		if got, ok := top.GPUByBusID(tc.bus); got != tc.want || ok != (tc.want >= 0) {
			t.Errorf("GPUByBusID(%q) = %d, %v; want %d", tc.bus, got, ok, tc.want)
		}
	}
	top.GPUs[1].UUID = "GPU-1"
	if i, ok := top.GPUByUUID("GPU-1"); i != 1 || !ok {
		t.Errorf("GPUByUUID = %d, %v", i, ok)
	}
	if _, ok := top.GPUByUUID(""); ok {
		t.Error("GPUByUUID found the empty UUID")
	}
}

func TestString(t *testing.T) {
	got := twoPlusOne().String()
	for _, want := range []string{
		"host n0\n",
		"driver 580.00, 3 GPU(s)",
		"GPU2  NVIDIA H200  N/A     00000000:9a:00.0  N/A   N/A           0        N/A",
		"GPU0    X     NV18  -",
		"GPU0  X     SYS   SYS",
		"GPU0  X     rw    -",
		"GPU0       X     NVL   CE",
		"GPU0 and GPU2: IOH topology not supported",
		"Legend:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("String() lacks %q:\n%s", want, got)
		}
	}
	if s := (&Topology{}).String(); s != "host unknown\ndriver unknown, 0 GPU(s)\n" {
		t.Errorf("empty topology: %q", s)
	}
}

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, ""}, {[]int{3}, "3"}, {[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"},
	} {
		if got := cpuList(tc.cpus); got != tc.want {
			t.Errorf("cpuList(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
	if got := maskBits([]uint{0b1011, 1}); !slices.Equal(got, []int{0, 1, 3, 64}) && !slices.Equal(got, []int{0, 1, 3, 32}) {
		t.Errorf("maskBits = %v", got)
	}
}

func TestBusIDs(t *testing.T) {
	for in, want := range map[string]string{
		"0000:18:00.0":      "00000000:18:00.0",
		"00000000:AB:00.0":  "00000000:ab:00.0",
		" 0001:C1:00.0\n":   "00000001:c1:00.0",
		"18:00.0":           "18:00.0", // no domain: left alone, matches nothing
		PCIBusID(1, 2, 3):   "00000001:02:03.0",
		PCIBusID(0, 255, 0): "00000000:ff:00.0",
	} {
		if got := NormalizeBusID(in); got != want {
			t.Errorf("NormalizeBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHost(t *testing.T) {
	files := map[string]string{
		"/proc/sys/kernel/random/boot_id": "6f1c0e2a-1111-2222-3333-444455556666\n",
		"/etc/machine-id":                 "0123456789abcdef\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	name := func() (string, error) { return "dgx01", nil }

	h := hostFrom(getenv, name, read)
	if h.Node != "dgx01/6f1c0e2a-1111-2222-3333-444455556666" || h.Source != "hostname+boot_id" || h.MachineID != "0123456789abcdef" {
		t.Errorf("boot id: %+v", h)
	}
	if s := h.String(); !strings.Contains(s, "from hostname+boot_id; MSCCL_NODE overrides") {
		t.Errorf("String: %q", s)
	}
	delete(files, "/proc/sys/kernel/random/boot_id")
	if h := hostFrom(getenv, name, read); h.Node != "dgx01/0123456789abcdef" || h.Source != "hostname+machine-id" {
		t.Errorf("machine id: %+v", h)
	}
	delete(files, "/etc/machine-id")
	if h := hostFrom(getenv, name, read); h.Node != "dgx01" || h.Source != "hostname" {
		t.Errorf("hostname only: %+v", h)
	}
	// Two processes of one machine declared different nodes.
	env[NodeEnv] = " node-b "
	h = hostFrom(getenv, name, read)
	if h.Node != "node-b" || h.Source != NodeEnv || h.Hostname != "dgx01" {
		t.Errorf("MSCCL_NODE: %+v", h)
	}
	if s := h.String(); s != "node-b (from MSCCL_NODE; hostname dgx01)" {
		t.Errorf("String: %q", s)
	}
	// The real host: some identity, whatever this machine offers.
	t.Setenv(NodeEnv, "")
	if h := LocalHost(); h.Node == "" || h.Source == NodeEnv {
		t.Errorf("LocalHost: %+v", h)
	}
}

func TestTransportErrors(t *testing.T) {
	top := twoPlusOne()
	for _, tc := range []struct {
		a, b RankPlace
		want string
	}{
		{RankPlace{"", 0}, RankPlace{"n0", 1}, "has no node identity"},
		{RankPlace{"n0", 0}, RankPlace{"n0", 3}, "GPU3 is not on this node, which has 3 GPU(s)"},
		{RankPlace{"n0", -2}, RankPlace{"n0", 0}, "GPU-2 is not on this node"},
		{RankPlace{"n0", NoGPU}, RankPlace{"n0", 0}, "a CPU-device rank and a GPU rank on one node cannot connect"},
		{RankPlace{"n1", 0}, RankPlace{"n1", 1}, "this is the topology of node n0, not theirs"},
	} {
		_, err := top.Transport(tc.a, tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Transport(%v, %v): %v, want %q", tc.a, tc.b, err, tc.want)
		}
	}
	if k := TransportKind(42); k.String() != "TransportKind(42)" || k.Short() != "?" || k.MemoryChannels() {
		t.Errorf("bad kind: %s %s", k, k.Short())
	}
}

func TestRanksPerNode(t *testing.T) {
	for _, tc := range []struct {
		nodes []string
		want  int
		err   string
	}{
		{[]string{"a"}, 1, ""},
		{[]string{"a", "a", "a", "a"}, 4, ""},
		{[]string{"a", "a", "b", "b", "c", "c"}, 2, ""},
		{[]string{"a", "b", "c"}, 1, ""},
		{nil, 0, "no ranks"},
		{[]string{"a", ""}, 0, "rank 1 has no node identity"},
		{[]string{"a", "a", "b"}, 0, "node a has 2 ranks and node b has 1: every node needs the same number of ranks"},
		{[]string{"a", "b", "a", "b"}, 0, "rank 1 is on node b, but ranks 0-1 should all be on node a (2 ranks per node): ranks of a node must be consecutive"},
		{[]string{"a", "a", "b", "b", "a", "a", "b", "b"}, 0, "rank 2 is on node b, but ranks 0-3 should all be on node a"},
	} {
		got, err := RanksPerNode(tc.nodes)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("RanksPerNode(%q) = %d, %v; want %d", tc.nodes, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("RanksPerNode(%q): %v, want %q", tc.nodes, err, tc.err)
		}
	}
}

// On a machine with an NVIDIA driver, the real library; elsewhere the
// error must say NVML is missing.
func TestDiscover(t *testing.T) {
	top, err := Discover()
	if errors.Is(err, ErrNoNVML) {
		if !strings.Contains(err.Error(), "NVML not available") {
			t.Errorf("error: %v", err)
		}
		t.Skipf("no NVML: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", top)
	if len(top.GPUs) == 0 {
		t.Skip("NVML sees no GPU")
	}
	for i, g := range top.GPUs {
		if g.Name == "" || !strings.Contains(g.BusID, ":") || g.Memory == 0 || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU%d: %+v", i, g)
		}
		if top.Links[i][i].Label() != "X" || !top.P2P(i, i) {
			t.Errorf("GPU%d: self link %+v", i, top.Links[i][i])
		}
		if j, ok := top.GPUByBusID(g.BusID); !ok || j != i {
			t.Errorf("GPU%d: GPUByBusID(%s) = %d", i, g.BusID, j)
		}
		tr, err := top.Transport(RankPlace{top.Host.Node, i}, RankPlace{top.Host.Node, i})
		if err != nil || tr.Kind != SameGPU {
			t.Errorf("GPU%d: transport to itself %v, %v", i, tr, err)
		}
	}
}
