//go:build nvml

package topo

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlErr names the NVML call and its return code.
func nvmlErr(call string, r nvml.Return) error {
	return fmt.Errorf("topo: %s: %s", call, r.Error())
}

// maxCPUs bounds the CPU and NUMA masks asked of NVML; hosts with more
// logical CPUs than this report the first maxCPUs only.
const maxCPUs = 4096

// Discover reads the topology of this host's GPUs through the system's
// NVML (libnvidia-ml.so.1, loaded at run time) and this host's identity
// (LocalHost). Without the library or a driver it returns an error
// wrapping ErrNoNVML.
func Discover() (*Topology, error) {
	return DiscoverHost(LocalHost())
}

// DiscoverHost is Discover with the host identity given (msccl-bench
// prints the host it read before the GPUs).
func DiscoverHost(host Host) (*Topology, error) {
	return DiscoverWith(nvml.New(), host)
}

// DiscoverWith reads the topology through lib, an NVML implementation:
// nvml.New() for the real library, or a mock machine (topotest) in tests.
// It initializes and shuts lib down. Per-GPU and per-pair queries that a
// driver or GPU does not support leave the field at its zero (or
// unknown) value rather than failing the whole discovery.
func DiscoverWith(lib nvml.Interface, host Host) (*Topology, error) {
	if lib == nil {
		return nil, fmt.Errorf("%w: no NVML implementation given", ErrNoNVML)
	}
	if r := lib.Init(); r != nvml.SUCCESS {
		switch r {
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_LIB_RM_VERSION_MISMATCH:
			return nil, fmt.Errorf("%w: nvmlInit: %s (no NVIDIA driver or libnvidia-ml.so.1 on this machine)", ErrNoNVML, r.Error())
		}
		return nil, nvmlErr("nvmlInit", r)
	}
	defer lib.Shutdown()

	t := &Topology{Host: host}
	has := symbols(lib)
	if v, r := lib.SystemGetDriverVersion(); r == nvml.SUCCESS {
		t.Driver = v
	}
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, nvmlErr("nvmlDeviceGetCount", r)
	}
	devs := make([]nvml.Device, n)
	ends := make([][]linkEnd, n)
	for i := range devs {
		d, r := lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			return nil, nvmlErr(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), r)
		}
		devs[i] = d
		g, e := readGPU(d, i, has)
		t.GPUs = append(t.GPUs, g)
		ends[i] = e
	}
	isGPU := map[string]bool{}
	for _, g := range t.GPUs {
		isGPU[g.BusID] = true
	}
	for i := range ends {
		for k, e := range ends[i] {
			// Drivers that cannot name the far end's type: a bus id that is
			// no GPU of this host is an NVSwitch on HGX boards.
			if e.kind == endUnknown {
				ends[i][k].kind = endSwitch
				if isGPU[e.bus] {
					ends[i][k].kind = endGPU
				}
			}
		}
		for _, e := range ends[i] {
			if e.kind == endSwitch {
				t.GPUs[i].SwitchLinks++
			}
		}
	}
	t.Links = make([][]Link, n)
	for i := range devs {
		t.Links[i] = make([]Link, n)
		for j := range devs {
			if i == j {
				t.Links[i][j] = Link{Distance: DistSelf, P2PRead: true, P2PWrite: true, Atomics: true}
				continue
			}
			t.Links[i][j] = pair(devs[i], devs[j], t.GPUs[i], t.GPUs[j], ends[i])
		}
	}
	return t, nil
}

type endKind int

const (
	endUnknown endKind = iota
	endGPU
	endSwitch
	endOther // an NPU or a device NVML names but we do not use
)

// linkEnd is the far end of one active NVLink.
type linkEnd struct {
	bus  string
	kind endKind
}

// symbols reports whether the loaded NVML has a function. go-nvml binds
// symbols lazily, so calling one an older driver lacks would end the
// process; the calls newer than the R470 drivers are asked about first.
func symbols(lib nvml.Interface) func(string) bool {
	ext := lib.Extensions()
	return func(name string) bool { return ext == nil || ext.LookupSymbol(name) == nil }
}

// readGPU reads one GPU and the far ends of its active NVLinks; has says
// which newer NVML functions exist.
func readGPU(d nvml.Device, i int, has func(string) bool) (GPU, []linkEnd) {
	g := GPU{Index: i, NUMANode: -1}
	g.Name, _ = d.GetName()
	g.UUID, _ = d.GetUUID()
	if m, r := d.GetMemoryInfo(); r == nvml.SUCCESS {
		g.Memory = m.Total
	}
	if pci, r := d.GetPciInfo(); r == nvml.SUCCESS {
		g.BusID = pciBus(pci)
	}
	g.NUMANode = numaNode(d, has)
	if mask, r := d.GetCpuAffinity(maxCPUs); r == nvml.SUCCESS {
		g.CPUs = maskBits(mask)
	}
	var ends []linkEnd
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, r := d.GetNvLinkState(l)
		if r != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
			// NOT_SUPPORTED or INVALID_ARGUMENT past the last link, or no
			// NVLink at all; a link that is down carries nothing.
			continue
		}
		g.NVLinks++
		var e linkEnd
		if rp, r := d.GetNvLinkRemotePciInfo(l); r == nvml.SUCCESS {
			e.bus = pciBus(rp)
		}
		e.kind = remoteKind(d, l, has)
		ends = append(ends, e)
	}
	return g, ends
}

// numaNode is the GPU's NUMA node, -1 when unknown. Drivers without
// nvmlDeviceGetNumaNodeId name it through memory affinity.
func numaNode(d nvml.Device, has func(string) bool) int {
	if has("nvmlDeviceGetNumaNodeId") {
		if node, r := d.GetNumaNodeId(); r == nvml.SUCCESS && node >= 0 {
			return node
		}
	}
	if has("nvmlDeviceGetMemoryAffinity") {
		if mask, r := d.GetMemoryAffinity(maxCPUs, nvml.AFFINITY_SCOPE_NODE); r == nvml.SUCCESS {
			if nodes := maskBits(mask); len(nodes) == 1 {
				return nodes[0]
			}
		}
	}
	return -1
}

// remoteKind is what NVLink l of d ends at, endUnknown where the driver
// cannot say (DiscoverWith then guesses from the bus id).
func remoteKind(d nvml.Device, l int, has func(string) bool) endKind {
	if !has("nvmlDeviceGetNvLinkRemoteDeviceType") {
		return endUnknown
	}
	ty, r := d.GetNvLinkRemoteDeviceType(l)
	switch {
	case r != nvml.SUCCESS:
		return endUnknown
	case ty == nvml.NVLINK_DEVICE_TYPE_GPU:
		return endGPU
	case ty == nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return endSwitch
	case ty == nvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return endOther
	}
	return endUnknown
}

// pair reads the path from GPU a to GPU b.
func pair(a, b nvml.Device, ga, gb GPU, endsA []linkEnd) Link {
	var l Link
	for _, e := range endsA {
		if e.kind == endGPU && e.bus == gb.BusID {
			l.NVLinks++
		}
	}
	if l.NVLinks == 0 && ga.SwitchLinks > 0 && gb.SwitchLinks > 0 {
		// Through the switch fabric a pair has the narrower GPU's links
		// (nvidia-smi shows NV18 between every pair of a DGX H100).
		l.NVSwitch = true
		l.NVLinks = min(ga.SwitchLinks, gb.SwitchLinks)
	}
	if lvl, r := a.GetTopologyCommonAncestor(b); r == nvml.SUCCESS {
		l.Distance = distance(lvl)
	}
	status := func(idx nvml.GpuP2PCapsIndex) (bool, string) {
		s, r := a.GetP2PStatus(b, idx)
		switch {
		case r != nvml.SUCCESS:
			return false, "NVML cannot tell (" + r.Error() + ")"
		case s != nvml.P2P_STATUS_OK:
			return false, p2pStatusName(s)
		}
		return true, ""
	}
	var whyR, whyW string
	l.P2PRead, whyR = status(nvml.P2P_CAPS_INDEX_READ)
	l.P2PWrite, whyW = status(nvml.P2P_CAPS_INDEX_WRITE)
	l.Atomics, _ = status(nvml.P2P_CAPS_INDEX_ATOMICS)
	l.P2PNVLink, _ = status(nvml.P2P_CAPS_INDEX_NVLINK)
	if whyR != "" {
		l.P2PStatus = whyR
	} else if whyW != "" {
		l.P2PStatus = whyW
	}
	return l
}

// p2pStatusName says why NVML refuses a peer path, in nvidia-smi's words.
func p2pStatusName(s nvml.GpuP2PStatus) string {
	switch s {
	case nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED:
		return "chipset not supported"
	case nvml.P2P_STATUS_GPU_NOT_SUPPORTED:
		return "GPU not supported"
	case nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED:
		return "IOH topology not supported"
	case nvml.P2P_STATUS_DISABLED_BY_REGKEY:
		return "disabled by regkey"
	case nvml.P2P_STATUS_NOT_SUPPORTED:
		return "not supported"
	}
	return fmt.Sprintf("unknown (status %d)", int(s))
}

func distance(lvl nvml.GpuTopologyLevel) Distance {
	switch lvl {
	case nvml.TOPOLOGY_INTERNAL:
		return DistBoard
	case nvml.TOPOLOGY_SINGLE:
		return DistPIX
	case nvml.TOPOLOGY_MULTIPLE:
		return DistPXB
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return DistPHB
	case nvml.TOPOLOGY_NODE:
		return DistNode
	case nvml.TOPOLOGY_SYSTEM:
		return DistSys
	}
	return DistUnknown
}

// pciBus is the normalized bus id of p: its BusId string, or where a
// driver left that empty, the id formed from its numbers.
func pciBus(p nvml.PciInfo) string {
	if s := busID(p.BusId[:]); s != "" {
		return s
	}
	if p.Domain|p.Bus|p.Device == 0 {
		return ""
	}
	return PCIBusID(int(p.Domain), int(p.Bus), int(p.Device))
}
