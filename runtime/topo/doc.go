// Package topo discovers how the GPUs of one host are connected: their
// names and PCI bus ids, the NVLink links between each pair, peer-to-peer
// capabilities, and the PCIe/NUMA distance, through NVML
// (github.com/NVIDIA/go-nvml, which dlopens libnvidia-ml itself). The
// executor uses it to choose memory vs port channels and to order rings;
// String prints a matrix in the style of `nvidia-smi topo -m`.
//
// It only reads: it must not change device state (no clocks, no modes) and
// must not touch CUDA contexts (that is runtime/cuda). Without NVML,
// Discover returns an error wrapping ErrNoNVML and callers fall back to
// CUDA's own peer queries or assume PCIe.
package topo
