// Package topo discovers what a process needs to know about where it
// runs: the host's identity (hostname and boot id, or MSCCL_NODE, which
// decides which ranks share a node), the GPUs (index, UUID, name, memory,
// PCI bus id, NUMA node and CPU affinity), the NVLink links between each
// pair (direct, or through NVSwitch), peer-to-peer capability per pair
// and the PCIe path, all through NVML (github.com/NVIDIA/go-nvml, which
// dlopens libnvidia-ml itself). From that it chooses a transport for
// every pair of ranks (Transport: memory channels over NVLink or PCIe
// P2P, port channels on the copy engine, the socket transport between
// nodes, shared memory for the CPU device) and checks the ranks-per-node
// layout the selection table is keyed on (RanksPerNode). String prints it
// all; msccl-bench --topo shows it. It never reads plans: whether a
// plan's channels can be built between ranks as placed is answered when
// an executor connects them (runtime/comm's Connect refuses a memory
// channel or remote buffer across nodes, naming both nodes).
//
// Discovery goes through an nvml.Interface (DiscoverWith), so tests run
// it against go-nvml's mock DGX machines (topotest). Without NVML,
// Discover returns an error wrapping ErrNoNVML; callers that can run
// without it (one GPU, the CPU device) fall back to CUDA's own peer
// queries.
//
// It only reads: it must not change device state (no clocks, no modes,
// no affinity) and must not touch CUDA contexts (that is runtime/cuda);
// it opens no connections (that is the bootstrap and the communicator).
package topo
