package topo

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Distance is the PCIe/system path between two GPUs, as NVML's common
// ancestor levels and nvidia-smi's legend name them.
type Distance int

const (
	DistUnknown Distance = iota
	DistSelf             // X: the same GPU
	DistBoard            // the same multi-GPU board
	DistPIX              // at most one PCIe bridge
	DistPXB              // several PCIe bridges, no host bridge
	DistPHB              // through a PCIe host bridge (one CPU)
	DistNode             // across host bridges within a NUMA node
	DistSys              // across the SMP interconnect between NUMA nodes
)

var distNames = [...]string{"?", "X", "BOARD", "PIX", "PXB", "PHB", "NODE", "SYS"}

func (d Distance) String() string {
	if d < 0 || int(d) >= len(distNames) {
		return fmt.Sprintf("Distance(%d)", int(d))
	}
	return distNames[d]
}

// GPU is one device as NVML numbers it (which matches CUDA's ordinal only
// with CUDA_DEVICE_ORDER=PCI_BUS_ID and no CUDA_VISIBLE_DEVICES: find a
// CUDA device by its bus id, GPUByBusID).
type GPU struct {
	Index       int
	Name        string
	UUID        string
	BusID       string // lower case, "00000000:18:00.0"
	Memory      uint64 // bytes of device memory; 0 when unknown
	NUMANode    int    // -1 when unknown
	CPUs        []int  // the CPUs close to the GPU (NVML's CPU affinity); nil when unknown
	NVLinks     int    // active NVLink links, to GPUs or switches
	SwitchLinks int    // of NVLinks, those that end at an NVSwitch
}

// Link describes the path from GPU i to GPU j.
type Link struct {
	Distance Distance
	// NVLinks counts the links between i and j: direct ones, or through
	// the NVSwitch fabric (NVSwitch set) the switch links of the GPU that
	// has fewer, as nvidia-smi counts them.
	NVLinks   int
	NVSwitch  bool // i and j reach each other through NVSwitches
	P2PRead   bool // NVML P2P status OK for reads
	P2PWrite  bool
	Atomics   bool
	P2PNVLink bool   // NVML says the peer path is NVLink
	P2PStatus string // why NVML refuses reads or writes ("" when both are OK)
}

// Topology is one host's identity, its GPUs and the matrix of links
// between them; Links[i][j] is from GPU i to GPU j.
type Topology struct {
	Host   Host
	Driver string
	GPUs   []GPU
	Links  [][]Link
}

// Label is the matrix cell of `nvidia-smi topo -m`: X, NV<n>, or the
// PCIe distance.
func (l Link) Label() string {
	switch {
	case l.Distance == DistSelf:
		return "X"
	case l.NVLinks > 0:
		return fmt.Sprintf("NV%d", l.NVLinks)
	case l.NVSwitch || l.P2PNVLink:
		return "NV"
	}
	return l.Distance.String()
}

// NVLink reports whether the path is NVLink, direct or switched.
func (l Link) NVLink() bool { return l.NVLinks > 0 || l.NVSwitch || l.P2PNVLink }

// P2P reports whether GPU i can load and store GPU j's memory directly.
func (t *Topology) P2P(i, j int) bool {
	if i == j {
		return i >= 0 && i < len(t.GPUs)
	}
	if i < 0 || j < 0 || i >= len(t.Links) || j >= len(t.Links[i]) {
		return false
	}
	l := t.Links[i][j]
	return l.P2PRead && l.P2PWrite
}

// Peers lists the GPUs that GPU i reaches peer-to-peer over NVLink.
func (t *Topology) Peers(i int) []int {
	var out []int
	if i < 0 || i >= len(t.Links) {
		return nil
	}
	for j, l := range t.Links[i] {
		if j != i && l.NVLink() {
			out = append(out, j)
		}
	}
	return out
}

// GPUByBusID finds the GPU at a PCI bus id (any case, 4- or 8-digit
// domain; PCIBusID forms one from CUDA's attributes).
func (t *Topology) GPUByBusID(bus string) (int, bool) {
	bus = NormalizeBusID(bus)
	for i, g := range t.GPUs {
		if g.BusID == bus && bus != "" {
			return i, true
		}
	}
	return -1, false
}

// GPUByUUID finds the GPU with NVML's UUID ("GPU-...", as
// CUDA_VISIBLE_DEVICES and nvidia-smi -L print it).
func (t *Topology) GPUByUUID(uuid string) (int, bool) {
	for i, g := range t.GPUs {
		if g.UUID == uuid && uuid != "" {
			return i, true
		}
	}
	return -1, false
}

// String renders the host, a table of the GPUs and four matrices: NVLink
// links (nvidia-smi's NV#), the PCIe path, peer-to-peer capability, and
// the transport Transport picks between ranks on each pair; then the
// reasons NVML gives for pairs without P2P, and a legend. msccl-bench
// --topo prints it.
func (t *Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host %s\n", t.Host)
	driver := t.Driver
	if driver == "" {
		driver = "unknown"
	}
	fmt.Fprintf(&b, "driver %s, %d GPU(s)\n", driver, len(t.GPUs))
	if len(t.GPUs) == 0 {
		return b.String()
	}
	b.WriteByte('\n')
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.TrimRight(strings.Join(cells, "\t"), "\t")) }
	row("GPU", "Name", "Memory", "Bus ID", "NUMA", "CPU affinity", "NVLinks", "UUID")
	for i, g := range t.GPUs {
		mem := "N/A"
		if g.Memory > 0 {
			mem = fmt.Sprintf("%d MiB", g.Memory>>20)
		}
		numa := "N/A"
		if g.NUMANode >= 0 {
			numa = strconv.Itoa(g.NUMANode)
		}
		links := strconv.Itoa(g.NVLinks)
		if g.SwitchLinks > 0 {
			links += fmt.Sprintf(" (%d to NVSwitch)", g.SwitchLinks)
		}
		row(fmt.Sprintf("GPU%d", i), orNA(g.Name), mem, orNA(g.BusID), numa, orNA(cpuList(g.CPUs)), links, orNA(g.UUID))
	}
	tw.Flush()
	matrix := func(title string, cell func(i, j int) string) {
		b.WriteByte('\n')
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		head := []string{title}
		for i := range t.GPUs {
			head = append(head, fmt.Sprintf("GPU%d", i))
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for i := range t.GPUs {
			cells := []string{fmt.Sprintf("GPU%d", i)}
			for j := range t.GPUs {
				cells = append(cells, cell(i, j))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		tw.Flush()
	}
	matrix("NVLink", func(i, j int) string {
		l := t.cell(i, j)
		if l.Distance == DistSelf || l.NVLink() {
			return l.Label()
		}
		return "-"
	})
	matrix("PCIe", func(i, j int) string { return t.cell(i, j).Distance.String() })
	matrix("P2P", func(i, j int) string { return t.cell(i, j).p2pLabel() })
	matrix("Transport", func(i, j int) string {
		tr, err := t.Transport(RankPlace{Node: t.Host.Node, GPU: i}, RankPlace{Node: t.Host.Node, GPU: j})
		if err != nil {
			return "?"
		}
		return tr.Kind.Short()
	})
	var refused []string
	for i := range t.GPUs {
		for j := i + 1; j < len(t.GPUs); j++ {
			ab, ba := t.cell(i, j).P2PStatus, t.cell(j, i).P2PStatus
			switch {
			case ab == ba && ab != "":
				refused = append(refused, fmt.Sprintf("  GPU%d and GPU%d: %s\n", i, j, ab))
			case ab != "" || ba != "":
				ok := func(s string) string {
					if s == "" {
						return "ok"
					}
					return s
				}
				refused = append(refused, fmt.Sprintf("  GPU%d -> GPU%d: %s; GPU%d -> GPU%d: %s\n", i, j, ok(ab), j, i, ok(ba)))
			}
		}
	}
	if len(refused) > 0 {
		b.WriteString("\nNo P2P (NVML's reason):\n")
		b.WriteString(strings.Join(refused, ""))
	}
	b.WriteString("\nLegend:\n" +
		"  NVLink: X self; NV# links between the pair (direct, or through NVSwitch: the\n" +
		"          narrower GPU's switch links); - none\n" +
		"  PCIe:   PIX one PCIe bridge; PXB several bridges; PHB a host bridge; NODE host\n" +
		"          bridges in one NUMA node; SYS across NUMA nodes; BOARD one board\n" +
		"  P2P:    rw peer reads and writes; r or w one of them; - none\n" +
		"  Transport between ranks on the two GPUs: NVL memory channel over NVLink; PCI\n" +
		"          memory channel over PCIe P2P; CE port channel, copy engine via the host\n" +
		"          proxy; X one GPU (memory channel within the device)\n")
	return b.String()
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// cpuList prints CPU numbers as ranges: 0-55,112-167.
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func (t *Topology) cell(i, j int) Link {
	if i == j {
		return Link{Distance: DistSelf}
	}
	if i >= 0 && j >= 0 && i < len(t.Links) && j < len(t.Links[i]) {
		return t.Links[i][j]
	}
	return Link{}
}

func (l Link) p2pLabel() string {
	switch {
	case l.Distance == DistSelf:
		return "X"
	case l.P2PRead && l.P2PWrite:
		return "rw"
	case l.P2PRead:
		return "r"
	case l.P2PWrite:
		return "w"
	}
	return "-"
}
