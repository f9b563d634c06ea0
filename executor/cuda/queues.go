package cudaexec

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

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

// openPortExecutors counts the open executors whose plans have port
// channels: while one is open, every Open checks the process's streams.
var openPortExecutors atomic.Int64

// queueNeed is what checkQueues weighs for one Open.
type queueNeed struct {
	ranks, proxyQueues int
	live               int  // streams already made through runtime/cuda
	portOpen           bool // an executor with port channels is open
}

func needOf(p *ir.Plan) queueNeed {
	q := queueNeed{ranks: len(p.GPUs)}
	for r := range p.GPUs {
		for _, c := range p.GPUs[r].Channels {
			if c.Type == ir.ChanPort {
				q.proxyQueues++
				break
			}
		}
	}
	return q
}

// checkQueues refuses to open a plan when a port proxy would have to share
// a hardware queue: the plan has port channels, or an executor with port
// channels is open, and the process's streams (those already made, this
// executor's rank and proxy streams, and the caller's) outnumber the
// queues. Without port channels there is no copy the kernels wait for, and
// any number of streams is safe.
func checkQueues(name string, q queueNeed, conns int, shared bool) error {
	if shared || (q.proxyQueues == 0 && !q.portOpen) {
		return nil
	}
	streams := q.live + q.ranks + q.proxyQueues + 1
	if conns >= streams {
		return nil
	}
	why := fmt.Sprintf("plan %q has port channels", name)
	if q.proxyQueues == 0 {
		why = "an executor with port channels is open"
	}
	return fmt.Errorf("cudaexec: %s and the process would have %d streams (%d already, %d ranks, %d proxy queues, the caller's), "+
		"but CUDA_DEVICE_MAX_CONNECTIONS gives %d hardware queues: a proxy copy queued behind another stream's wait "+
		"for the kernels would never run (deadlock). Close other executors, unset CUDA_DEVICE_MAX_CONNECTIONS "+
		"(the executor then sets %d) or raise it",
		why, streams, q.live, q.ranks, q.proxyQueues, conns, driverMaxConnections)
}
