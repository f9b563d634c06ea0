//go:build !nvml

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/runtime/topo"
)

// A build without the nvml tag still prints the host line, then fails
// (exit status 1) saying how to build a --topo that reads the GPUs.
func TestTopoWithoutNVMLTag(t *testing.T) {
	oldHost := localHost
	t.Cleanup(func() { localHost = oldHost })
	localHost = func() topo.Host { return topo.Host{Node: "dgx01", Hostname: "dgx01", Source: topo.NodeEnv} }
	var out bytes.Buffer
	err := run([]string{"--topo"}, &out)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "NVML not available") || !strings.Contains(err.Error(), "-tags nvml") {
		t.Errorf("--topo without the nvml tag: %v (exit %d), want NVML not available and the -tags nvml hint", err, exitCode(err))
	}
	if out.String() != "host dgx01 (from MSCCL_NODE; hostname dgx01)\n" {
		t.Errorf("printed %q, want the host line", out.String())
	}
}
