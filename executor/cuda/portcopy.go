package cudaexec

import (
	"fmt"
	"os"
	"strconv"
)

// PortCopy chooses what moves a port channel's bytes.
type PortCopy int

const (
	// PortCopyAuto picks PortCopyProxy when the context has its 32
	// hardware queues and PortCopySM when CUDA_DEVICE_MAX_CONNECTIONS is
	// lower (Megatron-LM sets 1); MSCCL_PORT_COPY=proxy|sm overrides it.
	PortCopyAuto PortCopy = iota
	// PortCopyProxy: the host proxy's copy engines (cuMemcpyPeerAsync from
	// a context of its own), as MSCCL++ port channels do; SMs stay free.
	PortCopyProxy
	// PortCopySM: the kernel's own threads copy to the peer (as a memory
	// channel put does), signal the peer's inbound word in device memory,
	// and a flush waits for nothing. No FIFO, no proxy thread, no copy
	// engine: nothing the driver queues can stand between a put and the
	// kernels that wait for it.
	PortCopySM
)

func (c PortCopy) String() string {
	switch c {
	case PortCopyProxy:
		return "proxy"
	case PortCopySM:
		return "sm"
	}
	return "auto"
}

// resolvePortCopy turns Auto into a mode. Why not the proxy under fewer
// queues: measured on an H200 (docs/evidence), with
// CUDA_DEVICE_MAX_CONNECTIONS=1 and a second launch already queued behind
// the running one on a rank's stream, the proxy's first copy never
// completed although it is issued from another context: the driver still
// serialises it behind the blocked head of the ranks' one hardware queue.
// With one launch in flight the same plan ran 24043 launches clean, so the
// hazard is the queued launch, which every timed loop and graph replay
// has. SM copies take the queue out of the path.
func resolvePortCopy(c PortCopy) (PortCopy, error) {
	if c != PortCopyAuto {
		if c != PortCopyProxy && c != PortCopySM {
			return 0, fmt.Errorf("cudaexec: unknown PortCopy %d", int(c))
		}
		return c, nil
	}
	switch v := os.Getenv("MSCCL_PORT_COPY"); v {
	case "proxy":
		return PortCopyProxy, nil
	case "sm":
		return PortCopySM, nil
	case "", "auto":
	default:
		return 0, fmt.Errorf("cudaexec: MSCCL_PORT_COPY=%q: want proxy, sm or auto", v)
	}
	// The executor's package init sets 32 when the user set nothing, except
	// for MPS clients, which keep the driver's default of fewer queues.
	v := os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS")
	if n, err := strconv.Atoi(v); (err == nil && n < 32) || v == "" {
		return PortCopySM, nil
	}
	return PortCopyProxy, nil
}

// PortCopy reports how this executor moves port channels' bytes.
func (e *Executor) PortCopy() PortCopy { return e.opt.PortCopy }
