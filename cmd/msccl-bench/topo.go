package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/msccl-go/msccl-go/runtime/topo"
)

// What --topo reads: the system's NVML (through topo.DiscoverHost, which
// says how to rebuild where this binary was built without the nvml tag)
// and this process's host identity. Tests put a mock machine and a fixed
// host here.
var (
	discover  = topo.DiscoverHost
	localHost = topo.LocalHost
)

// topoFlag registers --topo on fs.
func topoFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("topo", false, "print this host's node identity and GPU topology (GPUs, NVLink and P2P matrices, NUMA, the transport per GPU pair) through NVML, and exit")
}

// runTopo is --topo: it prints the topology and exits, 0 when NVML
// answered. Without NVML (no NVIDIA driver) it still prints the host
// line, which is what decides which ranks share a node, then fails with
// an error that says NVML is missing (exit status 1). Other flags make no
// sense with it and are a wrong invocation.
func runTopo(fs *flag.FlagSet, w io.Writer) error {
	var others []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "topo" {
			others = append(others, "-"+f.Name)
		}
	})
	if others = append(others, fs.Args()...); len(others) > 0 {
		return usagef("--topo takes no other flags or arguments (got %s)", strings.Join(others, " "))
	}
	host := localHost()
	top, err := discover(host)
	if err != nil {
		fmt.Fprintf(w, "host %s\n", host)
		if errors.Is(err, topo.ErrNoNVML) {
			return fmt.Errorf("%w; --topo needs it for the GPU topology", err)
		}
		return fmt.Errorf("--topo: %w", err)
	}
	_, err = fmt.Fprint(w, top)
	return err
}
