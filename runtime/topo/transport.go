package topo

import "fmt"

// NoGPU is RankPlace.GPU for a rank of the CPU device.
const NoGPU = -1

// RankPlace is where a rank runs: its node (Host.Node of its process, as
// the bootstrap gathers it) and the GPU it drives, as an index into that
// node's Topology.GPUs (GPUByBusID finds it from CUDA's PCI attributes),
// or NoGPU for a rank of the CPU device.
type RankPlace struct {
	Node string
	GPU  int
}

// TransportKind is how two ranks reach each other's memory.
type TransportKind int

const (
	// SameGPU: both ranks drive one GPU; memory channels work within the
	// device (through CUDA IPC when the ranks are different processes).
	SameGPU TransportKind = iota
	// NVLink: memory channels, peer loads and stores over NVLink (direct
	// or through NVSwitch).
	NVLink
	// PCIeP2P: memory channels, peer loads and stores over PCIe.
	PCIeP2P
	// CopyEngine: no peer access between the GPUs; only port channels
	// work, their copies issued by the host proxy on the copy engine
	// (the driver stages them through host memory).
	CopyEngine
	// SharedMemory: CPU-device ranks of one node share POSIX shared
	// memory; memory channels are plain loads and stores.
	SharedMemory
	// Socket: different nodes; only port channels work, through the host
	// proxies over TCP.
	Socket
)

var kindNames = [...]string{"same-gpu", "nvlink", "pcie-p2p", "copy-engine", "shared-memory", "socket"}
var kindShort = [...]string{"X", "NVL", "PCI", "CE", "SHM", "SOCK"}

func (k TransportKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("TransportKind(%d)", int(k))
	}
	return kindNames[k]
}

// Short is the matrix cell Topology.String prints.
func (k TransportKind) Short() string {
	if k < 0 || int(k) >= len(kindShort) {
		return "?"
	}
	return kindShort[k]
}

// MemoryChannels reports whether a plan's memory channels can connect two
// ranks joined by k; port channels work over every kind.
func (k TransportKind) MemoryChannels() bool {
	switch k {
	case SameGPU, NVLink, PCIeP2P, SharedMemory:
		return true
	}
	return false
}

// Transport is the choice for one pair of ranks and why it was made, in
// words a user can check against `nvidia-smi topo -m`.
type Transport struct {
	Kind   TransportKind
	Reason string
}

func (tr Transport) String() string { return tr.Kind.String() + ": " + tr.Reason }

// Transport chooses how ranks at a and b connect. Ranks on different
// nodes use the socket transport. On one node: two CPU-device ranks share
// memory; ranks on one GPU connect within it; two GPUs with peer reads
// and writes both ways (NVML's P2P status) use memory channels over
// NVLink when NVML sees an NVLink path between them, else over PCIe;
// without peer access only port channels (copy engine) work. t must be
// the topology of the node a and b share (its Host.Node, when set, must
// match). An empty node, a GPU index outside t, or a CPU-device rank
// paired with a GPU rank on one node is an error.
func (t *Topology) Transport(a, b RankPlace) (Transport, error) {
	if a.Node == "" || b.Node == "" {
		return Transport{}, fmt.Errorf("topo: transport between %s and %s: a rank has no node identity", a, b)
	}
	if a.Node != b.Node {
		return Transport{Socket, fmt.Sprintf("different nodes (%s and %s)", a.Node, b.Node)}, nil
	}
	if t.Host.Node != "" && t.Host.Node != a.Node {
		return Transport{}, fmt.Errorf("topo: transport between %s and %s: this is the topology of node %s, not theirs", a, b, t.Host.Node)
	}
	switch {
	case a.GPU == NoGPU && b.GPU == NoGPU:
		return Transport{SharedMemory, "CPU-device ranks of one node"}, nil
	case a.GPU == NoGPU || b.GPU == NoGPU:
		return Transport{}, fmt.Errorf("topo: transport between %s and %s: a CPU-device rank and a GPU rank on one node cannot connect (run every rank on one kind of device)", a, b)
	}
	for _, g := range []int{a.GPU, b.GPU} {
		if g < 0 || g >= len(t.GPUs) {
			return Transport{}, fmt.Errorf("topo: transport between %s and %s: GPU%d is not on this node, which has %d GPU(s)", a, b, g, len(t.GPUs))
		}
	}
	i, j := a.GPU, b.GPU
	if i == j {
		return Transport{SameGPU, fmt.Sprintf("both ranks on GPU%d", i)}, nil
	}
	ab, ba := t.cell(i, j), t.cell(j, i)
	if !t.P2P(i, j) || !t.P2P(j, i) {
		why := ab.P2PStatus
		if why == "" {
			why = ba.P2PStatus
		}
		if why == "" {
			why = "reads or writes not both ways"
		}
		return Transport{CopyEngine, fmt.Sprintf("GPU%d and GPU%d have no peer access (NVML: %s; path %s)", i, j, why, ab.Distance)}, nil
	}
	if ab.NVLink() || ba.NVLink() {
		via := "direct"
		if ab.NVSwitch {
			via = "through NVSwitch"
		}
		n := max(ab.NVLinks, ba.NVLinks)
		if n == 0 {
			return Transport{NVLink, fmt.Sprintf("GPU%d and GPU%d: NVML reports an NVLink peer path", i, j)}, nil
		}
		return Transport{NVLink, fmt.Sprintf("GPU%d and GPU%d: %d NVLinks %s, peer reads and writes", i, j, n, via)}, nil
	}
	return Transport{PCIeP2P, fmt.Sprintf("GPU%d and GPU%d: peer reads and writes over PCIe (path %s)", i, j, ab.Distance)}, nil
}

func (p RankPlace) String() string {
	if p.GPU == NoGPU {
		return fmt.Sprintf("%q/cpu", p.Node)
	}
	return fmt.Sprintf("%q/GPU%d", p.Node, p.GPU)
}

// RanksPerNode checks the placement of a world given each rank's node
// (index = rank, as the bootstrap gathers them) and returns the number of
// ranks on each node, the key of the selection table with the world size.
// Multi-node plans assume rank r is on node r / perNode, so every node
// must hold the same number of ranks, consecutive ones; anything else is
// an error naming the ranks that break it (start such jobs with ranks
// grouped by node, as torchrun, mpirun --map-by node:PE and srun -m block
// do).
func RanksPerNode(nodes []string) (int, error) {
	if len(nodes) == 0 {
		return 0, fmt.Errorf("topo: no ranks")
	}
	for r, n := range nodes {
		if n == "" {
			return 0, fmt.Errorf("topo: rank %d has no node identity", r)
		}
	}
	count := map[string]int{}
	var order []string
	for _, n := range nodes {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	per := count[nodes[0]]
	for _, n := range order[1:] {
		if count[n] != per {
			return 0, fmt.Errorf("topo: node %s has %d ranks and node %s has %d: every node needs the same number of ranks", nodes[0], per, n, count[n])
		}
	}
	for r, n := range nodes {
		if want := nodes[r/per*per]; n != want {
			return 0, fmt.Errorf("topo: rank %d is on node %s, but ranks %d-%d should all be on node %s (%d ranks per node): ranks of a node must be consecutive", r, n, r/per*per, r/per*per+per-1, want, per)
		}
	}
	return per, nil
}
