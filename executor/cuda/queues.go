package cudaexec

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/ir"
)

// The driver deals a context's streams onto CUDA_DEVICE_MAX_CONNECTIONS
// hardware queues (default 8, at most 32), each in order. When streams
// outnumber queues, a port proxy's copy can land behind another stream's
// wait for the ranks' kernels (the caller joining a collective, a rank
// stream's fork for the next one), while those kernels wait for the copy:
// a deadlock. Measured on one H200 (scripts/gpu/probe-connections.sh,
// runtime/cuda TestCopyBehindSpinningKernel; docs/rationale.md): plans
// without port channels run at every value down to 1; the hierarchical
// ones hang at 1, 2 and 4 connections with 2 ranks (5 streams) and at
// 1-12 with 8 ranks (17 streams), and pass at 8 and 16 respectively.

const (
	driverDefaultConnections = 8
	driverMaxConnections     = 32
)

// connections is the number of hardware queues the driver gives a context,
// as CUDA_DEVICE_MAX_CONNECTIONS says (the driver reads it when the
// context is created; package init sets 32 unless the user chose).
func connections() int {
	v := strings.TrimSpace(os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return driverDefaultConnections
	}
	return min(n, driverMaxConnections)
}

// checkQueues refuses a plan with port channels when this executor's
// streams (one per rank, one per proxy queue, plus the caller's) cannot
// each have a hardware queue of their own. Plans without port channels
// have no copy the kernels wait for, and run at any value.
func checkQueues(p *ir.Plan, conns int, shared bool) error {
	proxyQueues := 0
	for r := range p.GPUs {
		for _, c := range p.GPUs[r].Channels {
			if c.Type == ir.ChanPort {
				proxyQueues++
				break
			}
		}
	}
	if proxyQueues == 0 || shared {
		return nil
	}
	streams := len(p.GPUs) + proxyQueues + 1
	if conns >= streams {
		return nil
	}
	return fmt.Errorf("cudaexec: plan %q has port channels and needs %d streams (%d ranks, %d proxy queues, the caller's), "+
		"but CUDA_DEVICE_MAX_CONNECTIONS gives %d hardware queues: a proxy copy queued behind another stream's wait "+
		"for the kernels would never run (deadlock). Unset CUDA_DEVICE_MAX_CONNECTIONS (the executor then sets %d) or set it to at least %d",
		p.Name, streams, len(p.GPUs), proxyQueues, conns, driverMaxConnections, streams)
}
