package topo

import (
	"fmt"
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

// GPU is one device as NVML numbers it (which matches CUDA's ordinal when
// CUDA_DEVICE_ORDER=PCI_BUS_ID).
type GPU struct {
	Index    int
	Name     string
	UUID     string
	BusID    string // lower case, "00000000:18:00.0"
	NUMANode int    // -1 when unknown
	NVLinks  int    // active NVLink links, to GPUs or switches
}

// Link describes the path from GPU i to GPU j.
type Link struct {
	Distance  Distance
	NVLinks   int  // NVLink links from i that end at j (0 through NVSwitch: see NVSwitch)
	NVSwitch  bool // i and j both have active NVLinks that end at switches
	P2PRead   bool // NVML P2P status OK for reads
	P2PWrite  bool
	Atomics   bool
	P2PNVLink bool // NVML says the peer path is NVLink
}

// Topology is the host's GPUs and the matrix of links between them;
// Links[i][j] is from GPU i to GPU j.
type Topology struct {
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

// P2P reports whether GPU i can load and store GPU j's memory directly.
func (t *Topology) P2P(i, j int) bool {
	if i == j {
		return true
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
		if j != i && (l.NVLinks > 0 || l.NVSwitch || l.P2PNVLink) {
			out = append(out, j)
		}
	}
	return out
}

// String renders the matrix like `nvidia-smi topo -m`, then a P2P matrix
// (rw: read and write, r/w: one of them, -: none) and a legend.
func (t *Topology) String() string {
	var b strings.Builder
	if t.Driver != "" {
		fmt.Fprintf(&b, "driver %s, %d GPU(s)\n", t.Driver, len(t.GPUs))
	}
	if len(t.GPUs) == 0 {
		b.WriteString("no GPUs\n")
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	head := []string{""}
	for i := range t.GPUs {
		head = append(head, fmt.Sprintf("GPU%d", i))
	}
	row(append(head, "NUMA", "Bus ID", "Name")...)
	for i, g := range t.GPUs {
		cells := []string{fmt.Sprintf("GPU%d", i)}
		for j := range t.GPUs {
			cells = append(cells, t.cell(i, j).Label())
		}
		numa := "N/A"
		if g.NUMANode >= 0 {
			numa = fmt.Sprint(g.NUMANode)
		}
		row(append(cells, numa, g.BusID, g.Name)...)
	}
	row()
	row(append([]string{"P2P"}, head[1:]...)...)
	for i := range t.GPUs {
		cells := []string{fmt.Sprintf("GPU%d", i)}
		for j := range t.GPUs {
			cells = append(cells, t.cell(i, j).p2pLabel())
		}
		row(cells...)
	}
	tw.Flush()
	b.WriteString("\nLegend: X self; NV# bonded NVLinks; NV via NVSwitch; PIX one PCIe bridge; " +
		"PXB several PCIe bridges; PHB PCIe host bridge; NODE host bridges in a NUMA node; SYS across NUMA nodes\n")
	return b.String()
}

func (t *Topology) cell(i, j int) Link {
	if i == j {
		return Link{Distance: DistSelf}
	}
	if i < len(t.Links) && j < len(t.Links[i]) {
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
