package main

import (
	"flag"
	"fmt"
	"slices"

	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// devicesFlag is --devices: where the in-process ranks run
// (cudaexec.Options.Devices). Unset, every rank is on GPU 0 as always.
func devicesFlag(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.devices, "devices", "", "place the ranks of this process on GPUs: a comma-separated device per rank (0,1,2,3), or a count N for round-robin over devices 0..N-1; ranks on distinct devices need peer access where a channel joins them, and run without -G, --reference and --trace")
}

// checkDevices refuses --devices combinations that cannot run, before any
// file is read.
func (c *config) checkDevices(pf *procFlags) error {
	switch {
	case c.devices == "":
		return nil
	case pf.procs > 0 || pf.perRank() || pf.cpuDevice():
		return usagef("--devices places ranks that share this process: it needs --device cuda without --procs or a launcher")
	case c.tune.on:
		return usagef("--devices does not apply to --tune")
	}
	return nil
}

// placeDevices resolves --devices for the plan's ranks against the
// visible GPUs (c.devs), refusing on one line a wrong length, an ordinal
// no GPU has, or a feature kept to one device.
func (c *config) placeDevices(p *ir.Plan) error {
	if c.devices == "" {
		return nil
	}
	devs, err := cudaexec.ParseDevices(c.devices, len(p.GPUs))
	if err != nil {
		return usagef("--devices: %v", err)
	}
	distinct := slices.Compact(slices.Sorted(slices.Values(devs)))
	if len(distinct) > 1 && (c.graph || c.perf.reference != "" || c.perf.trace != "") {
		return usagef("--devices %s puts ranks on %d devices: -G, --reference and --trace need every rank on one device", c.devices, len(distinct))
	}
	visible, err := cuda.DeviceCount()
	if err != nil {
		return err
	}
	if err := cudaexec.CheckDevices(devs, len(p.GPUs), visible); err != nil {
		return usagef("--devices: %v", err)
	}
	c.devs = devs
	return nil
}

// placement says where the ranks run, for the header: "one NVIDIA H200"
// as always, or with --devices each rank's device and the peer-access
// matrix ("devices [0 1 0 1] (NVIDIA H200), peers 0-1 p2p on (ranks 0,1)");
// the name is Devices[0]'s.
func placement(ex *cudaexec.Executor, devName string) string {
	devs := ex.Devices()
	if devs == nil {
		return "one " + devName
	}
	if n, err := cuda.Device(devs[0]).Name(); err == nil {
		devName = n
	}
	return fmt.Sprintf("devices %v (%s), peers %s", devs, devName, cudaexec.FormatPeers(ex.PeerAccess()))
}
