//go:build !nvml

package topo

import "fmt"

// Without the nvml build tag go-nvml is not compiled at all: its cgo
// bindings print ~150 lines of deprecation warnings on every clean build
// (docs/rationale.md), and only the --topo report needs it. Discovery then
// fails the way it does on a machine without a driver, so every caller's
// fallback (CUDA's own peer queries) still applies.

// Discover reads this host's GPU topology; this build has no NVML, so it
// returns an error wrapping ErrNoNVML that says how to build with it.
func Discover() (*Topology, error) {
	return DiscoverHost(LocalHost())
}

// DiscoverHost is Discover with the host identity given.
func DiscoverHost(Host) (*Topology, error) {
	return nil, fmt.Errorf("%w: this build leaves NVML out (rebuild with -tags nvml, e.g. go install -tags nvml ./cmd/msccl-bench)", ErrNoNVML)
}
