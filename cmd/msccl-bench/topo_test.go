//go:build nvml

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/msccl-go/msccl-go/runtime/topo"
	"github.com/msccl-go/msccl-go/runtime/topo/topotest"
)

// mockTopo makes --topo read lib and a fixed host for the rest of t.
func mockTopo(t *testing.T, lib nvml.Interface) {
	t.Helper()
	oldDiscover, oldHost := discover, localHost
	t.Cleanup(func() { discover, localHost = oldDiscover, oldHost })
	discover = func(h topo.Host) (*topo.Topology, error) { return topo.DiscoverWith(lib, h) }
	localHost = func() topo.Host { return topo.Host{Node: "dgx01", Hostname: "dgx01", Source: topo.NodeEnv} }
}

// --topo on go-nvml's mock DGX H200 prints exactly the golden topology of
// runtime/topo (the same machine, the same host) and exits 0.
func TestTopoDGXH200(t *testing.T) {
	mockTopo(t, topotest.DGXH200())
	var out bytes.Buffer
	err := run([]string{"--topo"}, &out)
	if err != nil || exitCode(err) != 0 {
		t.Fatalf("--topo: %v (exit %d)", err, exitCode(err))
	}
	want, err := os.ReadFile("../../runtime/topo/testdata/dgxh200.topo")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("--topo differs from runtime/topo/testdata/dgxh200.topo:\n--- got\n%s--- want\n%s", out.String(), want)
	}
	for _, line := range []string{
		"host dgx01 (from MSCCL_NODE; hostname dgx01)",
		"GPU4  NVIDIA H200 141GB HBM3e  144384 MiB  00000000:9a:00.0  1     56-111,168-223  18 (18 to NVSwitch)",
		"GPU0    X     NV18  NV18  NV18  NV18  NV18  NV18  NV18",
		"GPU0  X     NODE  NODE  NODE  SYS   SYS   SYS   SYS",
		"GPU7       NVL   NVL   NVL   NVL   NVL   NVL   NVL   X",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("--topo lacks %q", line)
		}
	}
}

// Without NVML: the host line, then an error saying NVML is missing, exit
// status 1. Other flags with --topo: a wrong invocation, exit status 2.
func TestTopoErrors(t *testing.T) {
	mockTopo(t, topotest.NoNVML())
	var out bytes.Buffer
	err := run([]string{"--topo"}, &out)
	want := "topo: NVML not available: nvmlInit: ERROR_LIBRARY_NOT_FOUND (no NVIDIA driver or libnvidia-ml.so.1 on this machine); --topo needs it for the GPU topology"
	if err == nil || err.Error() != want || exitCode(err) != 1 {
		t.Errorf("no NVML: %v (exit %d), want %q", err, exitCode(err), want)
	}
	if out.String() != "host dgx01 (from MSCCL_NODE; hostname dgx01)\n" {
		t.Errorf("no NVML printed %q", out.String())
	}
	for args, want := range map[string]string{
		"--topo --algo allreduce_ring": "--topo takes no other flags or arguments (got -algo)",
		"--topo -n 3 extra":            "--topo takes no other flags or arguments (got -n extra)",
	} {
		out.Reset()
		err := run(strings.Fields(args), &out)
		if err == nil || err.Error() != want || exitCode(err) != 2 || out.Len() != 0 {
			t.Errorf("run(%q): %v (exit %d), printed %q", args, err, exitCode(err), out.String())
		}
	}
}

// The real thing: on a machine with the NVIDIA driver --topo must work;
// elsewhere it must fail saying NVML is missing.
func TestTopoReal(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"--topo"}, &out)
	switch {
	case err == nil:
		t.Logf("\n%s", out.String())
		if !strings.Contains(out.String(), "GPU(s)") {
			t.Errorf("--topo printed %q", out.String())
		}
	case strings.Contains(err.Error(), "NVML not available"):
		t.Skipf("no NVML here: %v", err)
	default:
		t.Fatalf("--topo: %v", err)
	}
}
