//go:build linux && !amd64 && !arm64

package cpudev

// No memfd_create number known here: memfd falls back to /dev/shm.
const sysMemfdCreate = ^uintptr(0)
