package main

import (
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// One process per rank on the GPU: four processes on the machine's GPUs
// (round-robin, so one GPU hosts them all), buffers and semaphores shared
// through CUDA IPC, run LL, simple and port-channel plans, and rank 0
// checks every rank's output, read through its mapping, against the CPU
// executor. Skips without a CUDA driver.
func TestProcsCUDA(t *testing.T) {
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"allreduce_allpairs_packet", []string{"--algo", "allreduce_allpairs_packet", "--ranks", "4"}},
		{"allreduce_twoshot", []string{"--algo", "allreduce_twoshot", "--ranks", "4"}},
		{"allgather_direct", []string{"--algo", "allgather_direct", "--ranks", "4"}},
		{"allreduce_hierarchical", []string{"--algo", "allreduce_hierarchical", "-D", "nodes=2", "-D", "gpus_per_node=2", "--ranks", "4"}},
		// Declared on two nodes (MSCCL_NODE per process): the port
		// channels between them go through the socket transport, each
		// process's proxy sending over TCP and the peer's copying in.
		{"allreduce_hierarchical_2nodes", []string{"--nodes", "2", "--algo", "allreduce_hierarchical", "-D", "nodes=2", "-D", "gpus_per_node=2", "--ranks", "4"}},
		{"allgather_hierarchical_2nodes", []string{"--nodes", "2", "--algo", "allgather_hierarchical", "-D", "nodes=2", "-D", "gpus_per_node=2", "--ranks", "4"}},
	} {
		for _, ipc := range []string{"vmm", "legacy"} {
			t.Run(tc.name+"/"+ipc, func(t *testing.T) {
				if ipc == "vmm" {
					ok, why, err := cuda.VMMSupported(0)
					if err != nil || !ok {
						t.Skipf("no VMM handles: %s %v", why, err)
					}
				}
				t.Setenv("MSCCL_CUDA_IPC", ipc)
				start := time.Now()
				args := append([]string{"--procs", "4", "--device", "cuda"}, tc.args...)
				args = append(args, "-b", "1K", "-e", "1M", "-f", "32", "-c", "-n", "5", "-w", "2", "--timeout", "5s")
				out, errOut, code := benchCmd(t, args...)
				if code != 0 {
					t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
				}
				if !strings.Contains(out, "4 ranks in 4 processes on the cuda device") {
					t.Errorf("header missing:\n%s", out)
				}
				if cross := strings.Contains(out, "socket transport"); cross != strings.HasSuffix(tc.name, "_2nodes") {
					t.Errorf("header says socket transport %v:\n%s", cross, out)
				}
				if sizes := rowSizes(t, out); strings.Join(sizes, " ") != "1024 32768 1048576" {
					t.Errorf("rows for sizes %v, want 1024 32768 1048576:\n%s", sizes, out)
				}
				t.Logf("%s %s: %v\n%s", tc.name, ipc, time.Since(start).Round(time.Millisecond), out)
			})
		}
	}
}
