// Package topotest gives tests whole machines to discover: go-nvml's mock
// DGX H100 and H200 servers (8 GPUs each), and two PCIe boxes, with the
// answers those mocks lack (PCI bus ids, NUMA nodes and CPU affinity,
// NVLink state and far ends, the PCIe common ancestor and P2P status of
// every pair) wired into them from a layout that follows the real
// machines. Like net/http/httptest it is for tests only; nothing in a
// program imports it.
//
// It adds to the mocks by setting their Func fields, never by changing
// go-nvml, and it must not read the host (no files, no environment).
package topotest
