package topo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoNVML is wrapped when libnvidia-ml cannot be loaded or initialized
// (no NVIDIA driver on this machine).
var ErrNoNVML = errors.New("topo: NVML not available")

// nvmlErr names the NVML call and its return code.
func nvmlErr(call string, r nvml.Return) error {
	return fmt.Errorf("topo: %s: %s", call, r.Error())
}

// Discover reads the topology of all GPUs NVML sees. Per-pair queries that
// a driver or GPU does not support leave the field at its zero value rather
// than failing the whole discovery.
func Discover() (*Topology, error) {
	if r := nvml.Init(); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND || r == nvml.ERROR_DRIVER_NOT_LOADED || r == nvml.ERROR_NO_PERMISSION {
			return nil, fmt.Errorf("%w: nvmlInit: %s", ErrNoNVML, r.Error())
		}
		return nil, nvmlErr("nvmlInit", r)
	}
	defer nvml.Shutdown()

	t := &Topology{}
	if v, r := nvml.SystemGetDriverVersion(); r == nvml.SUCCESS {
		t.Driver = v
	}
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, nvmlErr("nvmlDeviceGetCount", r)
	}
	devs := make([]nvml.Device, n)
	// remote[i] lists, per active NVLink of GPU i, the bus id at its far end.
	remote := make([][]string, n)
	for i := range devs {
		d, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			return nil, nvmlErr(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), r)
		}
		devs[i] = d
		g := GPU{Index: i, NUMANode: -1}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if pci, r := d.GetPciInfo(); r == nvml.SUCCESS {
			g.BusID = busID(pci)
		}
		if node, r := d.GetNumaNodeId(); r == nvml.SUCCESS {
			g.NUMANode = node
		}
		for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
			st, r := d.GetNvLinkState(l)
			if r != nvml.SUCCESS {
				// NOT_SUPPORTED past the last link, or no NVLink at all.
				continue
			}
			if st != nvml.FEATURE_ENABLED {
				continue
			}
			g.NVLinks++
			if rp, r := d.GetNvLinkRemotePciInfo(l); r == nvml.SUCCESS {
				remote[i] = append(remote[i], busID(rp))
			}
		}
		t.GPUs = append(t.GPUs, g)
	}
	isGPU := map[string]bool{}
	for _, g := range t.GPUs {
		isGPU[g.BusID] = true
	}
	t.Links = make([][]Link, n)
	for i := range devs {
		t.Links[i] = make([]Link, n)
		for j := range devs {
			if i == j {
				t.Links[i][j] = Link{Distance: DistSelf, P2PRead: true, P2PWrite: true, Atomics: true}
				continue
			}
			t.Links[i][j] = pair(devs[i], devs[j], t.GPUs[j].BusID, remote[i], remote[j], isGPU)
		}
	}
	return t, nil
}

func pair(a, b nvml.Device, bBus string, remoteA, remoteB []string, isGPU map[string]bool) Link {
	var l Link
	for _, bus := range remoteA {
		if bus == bBus {
			l.NVLinks++
		}
	}
	l.NVSwitch = toSwitch(remoteA, isGPU) && toSwitch(remoteB, isGPU)
	if lvl, r := nvml.DeviceGetTopologyCommonAncestor(a, b); r == nvml.SUCCESS {
		l.Distance = distance(lvl)
	}
	ok := func(idx nvml.GpuP2PCapsIndex) bool {
		s, r := nvml.DeviceGetP2PStatus(a, b, idx)
		return r == nvml.SUCCESS && s == nvml.P2P_STATUS_OK
	}
	l.P2PRead = ok(nvml.P2P_CAPS_INDEX_READ)
	l.P2PWrite = ok(nvml.P2P_CAPS_INDEX_WRITE)
	l.Atomics = ok(nvml.P2P_CAPS_INDEX_ATOMICS)
	l.P2PNVLink = ok(nvml.P2P_CAPS_INDEX_NVLINK)
	return l
}

// toSwitch reports whether some active NVLink ends at a non-GPU device,
// which on HGX boards is an NVSwitch.
func toSwitch(remote []string, isGPU map[string]bool) bool {
	for _, bus := range remote {
		if !isGPU[bus] {
			return true
		}
	}
	return false
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

// busID normalizes NVML's bus id ("00000000:18:00.0", upper or lower case,
// sometimes with an 8- or 4-digit domain) so ids from different calls
// compare equal.
func busID(p nvml.PciInfo) string {
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	s := strings.ToLower(string(b))
	if i := strings.IndexByte(s, ':'); i >= 0 && i < 8 {
		s = strings.Repeat("0", 8-i) + s
	}
	return s
}
