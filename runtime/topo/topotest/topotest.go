//go:build nvml

package topotest

import (
	"fmt"
	"math/bits"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// End is the far end of one NVLink: another GPU (by index) or an
// NVSwitch (by its bus id).
type End struct {
	GPU    int // -1 for a switch
	Switch string
}

// Layout is the fabric a mock answers with, indexed by GPU.
type Layout struct {
	BusIDs   []string // "0000:18:00.0", as NVML prints them (4-digit domain)
	NUMA     []int
	CPUs     [][]int
	NVLinks  [][]End                                         // per GPU, in link order
	Ancestor func(i, j int) nvml.GpuTopologyLevel            // PCIe common ancestor
	P2P      func(i, j int) (ok bool, why nvml.GpuP2PStatus) // peer reads and writes
}

// dgxLayout is an HGX H100/H200 board as nvidia-smi shows it: eight
// GPUs, each with 18 NVLinks into four NVSwitches (5+4+4+5), GPUs 0-3 on
// NUMA node 0 and 4-7 on node 1 of a two-socket host with 56 cores (112
// threads) per socket, every pair peer-capable over NVLink.
func dgxLayout() Layout {
	l := Layout{
		BusIDs: []string{"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0", "0000:5D:00.0", "0000:9A:00.0", "0000:AB:00.0", "0000:BA:00.0", "0000:DB:00.0"},
	}
	switches := []string{"0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"}
	perSwitch := []int{5, 4, 4, 5}
	for g := 0; g < 8; g++ {
		node := g / 4
		l.NUMA = append(l.NUMA, node)
		var cpus []int
		for c := node * 56; c < node*56+56; c++ {
			cpus = append(cpus, c)
		}
		for c := 112 + node*56; c < 112+node*56+56; c++ {
			cpus = append(cpus, c)
		}
		l.CPUs = append(l.CPUs, cpus)
		var ends []End
		for s, n := range perSwitch {
			for k := 0; k < n; k++ {
				ends = append(ends, End{GPU: -1, Switch: switches[s]})
			}
		}
		l.NVLinks = append(l.NVLinks, ends)
	}
	l.Ancestor = func(i, j int) nvml.GpuTopologyLevel {
		if i/4 == j/4 {
			return nvml.TOPOLOGY_NODE
		}
		return nvml.TOPOLOGY_SYSTEM
	}
	l.P2P = func(i, j int) (bool, nvml.GpuP2PStatus) { return true, nvml.P2P_STATUS_OK }
	return l
}

// DGXH100 is go-nvml's mock DGX H100 (8 × H100 80GB HBM3) with the fabric
// of the real board.
func DGXH100() *server.Server { return Wire(dgxh100.New(), dgxLayout(), "h100") }

// DGXH200 is go-nvml's mock DGX H200 (8 × H200 141GB HBM3e), the same
// board as the H100's.
func DGXH200() *server.Server { return Wire(dgxh200.New(), dgxLayout(), "h200") }

// PCIeBox is four A100 PCIe 80GB without NVLink: GPUs 0 and 1 under one
// PCIe switch on NUMA node 0, GPUs 2 and 3 under another on node 1. Peer
// access works under a switch and nowhere else (the SMP link between the
// sockets does not carry P2P), so it has PCIe P2P pairs and copy-engine
// pairs.
func PCIeBox() *server.Server {
	l := Layout{
		BusIDs:  []string{"0000:1B:00.0", "0000:1C:00.0", "0000:88:00.0", "0000:89:00.0"},
		NUMA:    []int{0, 0, 1, 1},
		CPUs:    [][]int{rangeInts(0, 16), rangeInts(0, 16), rangeInts(16, 32), rangeInts(16, 32)},
		NVLinks: make([][]End, 4),
		Ancestor: func(i, j int) nvml.GpuTopologyLevel {
			if i/2 == j/2 {
				return nvml.TOPOLOGY_SINGLE
			}
			return nvml.TOPOLOGY_SYSTEM
		},
		P2P: func(i, j int) (bool, nvml.GpuP2PStatus) {
			if i/2 == j/2 {
				return true, nvml.P2P_STATUS_OK
			}
			return false, nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED
		},
	}
	return Wire(dgxh100.NewWithGPUs(gpus.Multiple(4, gpus.A100_PCIE_80GB)...), l, "a100pcie")
}

// BridgedPairs is four A100 PCIe 80GB on one NUMA node behind one host
// bridge, GPUs 0-1 and 2-3 joined by NVLink bridges of 12 links each:
// direct NVLink within a pair, PCIe P2P across pairs.
func BridgedPairs() *server.Server {
	bridge := func(peer int) []End {
		ends := make([]End, 12)
		for k := range ends {
			ends[k] = End{GPU: peer}
		}
		return ends
	}
	all := rangeInts(0, 32)
	l := Layout{
		BusIDs:   []string{"0000:17:00.0", "0000:31:00.0", "0000:B1:00.0", "0000:CA:00.0"},
		NUMA:     []int{0, 0, 0, 0},
		CPUs:     [][]int{all, all, all, all},
		NVLinks:  [][]End{bridge(1), bridge(0), bridge(3), bridge(2)},
		Ancestor: func(i, j int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_HOSTBRIDGE },
		P2P:      func(i, j int) (bool, nvml.GpuP2PStatus) { return true, nvml.P2P_STATUS_OK },
	}
	return Wire(dgxh100.NewWithGPUs(gpus.Multiple(4, gpus.A100_PCIE_80GB)...), l, "a100nvl")
}

// NoNVML is an NVML whose library cannot be loaded, as on a machine
// without the NVIDIA driver.
func NoNVML() nvml.Interface {
	return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
}

func rangeInts(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// Wire sets the answers of l into every device of s and gives the GPUs
// UUIDs that depend on tag and index only (the mock draws random ones),
// so printed topologies are stable. It returns s.
func Wire(s *server.Server, l Layout, tag string) *server.Server {
	devs := make([]*server.Device, len(s.Devices))
	for i, d := range s.Devices {
		devs[i] = d.(*server.Device)
	}
	if len(l.BusIDs) != len(devs) {
		panic(fmt.Sprintf("topotest: layout for %d GPUs wired into a server of %d", len(l.BusIDs), len(devs)))
	}
	index := func(d nvml.Device) int {
		i, r := d.GetIndex()
		if r != nvml.SUCCESS {
			return -1
		}
		return i
	}
	for i, d := range devs {
		i, d := i, d
		d.PciBusID = l.BusIDs[i]
		d.UUID = fmt.Sprintf("GPU-%08x-0000-4000-8000-%012d", hash(tag), i)
		// The mock's PciInfo carries the device id only.
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			return pciInfo(l.BusIDs[i], d.Config.PciDeviceId), nvml.SUCCESS
		}
		d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return l.NUMA[i], nvml.SUCCESS }
		d.GetMemoryAffinityFunc = func(n int, _ nvml.AffinityScope) ([]uint, nvml.Return) {
			return mask([]int{l.NUMA[i]}, n), nvml.SUCCESS
		}
		d.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) { return mask(l.CPUs[i], n), nvml.SUCCESS }
		ends := l.NVLinks[i]
		link := func(k int) (End, nvml.Return) {
			switch {
			case k < 0 || k >= nvml.NVLINK_MAX_LINKS:
				return End{}, nvml.ERROR_INVALID_ARGUMENT
			case k >= len(ends):
				return End{}, nvml.ERROR_NOT_SUPPORTED
			}
			return ends[k], nvml.SUCCESS
		}
		d.GetNvLinkStateFunc = func(k int) (nvml.EnableState, nvml.Return) {
			if _, r := link(k); r != nvml.SUCCESS {
				return nvml.FEATURE_DISABLED, r
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkRemotePciInfoFunc = func(k int) (nvml.PciInfo, nvml.Return) {
			e, r := link(k)
			if r != nvml.SUCCESS {
				return nvml.PciInfo{}, r
			}
			if e.GPU >= 0 {
				return pciInfo(l.BusIDs[e.GPU], 0), nvml.SUCCESS
			}
			return pciInfo(e.Switch, 0), nvml.SUCCESS
		}
		d.GetNvLinkRemoteDeviceTypeFunc = func(k int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			e, r := link(k)
			switch {
			case r != nvml.SUCCESS:
				return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, r
			case e.GPU >= 0:
				return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
			}
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
		d.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j := index(o)
			if j < 0 || j >= len(devs) {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			if j == i {
				return nvml.TOPOLOGY_INTERNAL, nvml.SUCCESS
			}
			return l.Ancestor(i, j), nvml.SUCCESS
		}
		d.GetP2PStatusFunc = func(o nvml.Device, idx nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			j := index(o)
			if j < 0 || j >= len(devs) {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			ok, why := l.P2P(i, j)
			if idx == nvml.P2P_CAPS_INDEX_NVLINK && !linked(l, i, j) {
				ok, why = false, nvml.P2P_STATUS_NOT_SUPPORTED
			}
			if !ok {
				return why, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_OK, nvml.SUCCESS
		}
	}
	return s
}

// linked reports whether GPUs i and j have an NVLink path: a direct link,
// or both into switches.
func linked(l Layout, i, j int) bool {
	sw := func(g int) bool {
		for _, e := range l.NVLinks[g] {
			if e.GPU < 0 {
				return true
			}
		}
		return false
	}
	for _, e := range l.NVLinks[i] {
		if e.GPU == j {
			return true
		}
	}
	return sw(i) && sw(j)
}

func pciInfo(bus string, devID uint32) nvml.PciInfo {
	p := nvml.PciInfo{PciDeviceId: devID}
	for k := 0; k < len(bus) && k < len(p.BusId)-1; k++ {
		p.BusId[k] = int8(bus[k])
	}
	var dom, b, dev, fn uint32
	if _, err := fmt.Sscanf(bus, "%x:%x:%x.%x", &dom, &b, &dev, &fn); err == nil {
		p.Domain, p.Bus, p.Device = dom, b, dev
	}
	return p
}

// mask is NVML's bitmask of machine words for the set bits listed, in a
// buffer sized as go-nvml sizes it for n.
func mask(bitsSet []int, n int) []uint {
	const w = bits.UintSize
	words := max((n-1)/8+1, 1)
	out := make([]uint, words)
	for _, b := range bitsSet {
		if b/w < len(out) {
			out[b/w] |= 1 << (b % w)
		}
	}
	return out
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}
