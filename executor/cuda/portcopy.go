package cudaexec

import (
	"os"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// PortCopy chooses what moves a port channel's bytes.
type PortCopy int

const (
	// PortCopyAuto picks PortCopySM (resolvePortCopy says why);
	// MSCCL_PORT_COPY=proxy|sm overrides it.
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

// resolvePortCopy turns Auto into a mode: SMs, always, since the
// session of 2026-12-03 (docs/evidence/gpu_port_proxy_late.log): the
// default oracle matrix at 32 queues hung twice in proxy mode
// (allreduce_hierarchical@8 at 129200 B bf16 min, @2 at 1 MiB f16 min,
// after 4 and 7 clean cases), and the proxy's own account at the report
// had every request pushed, taken and its copies complete, with nothing
// held: the signals and flushes arrived, but after the 3 s watchdog, or
// unseen. Which driver call or visibility rule delayed them is not
// settled, so the proxy is opt-in (MSCCL_PORT_COPY=proxy, Options.PortCopy)
// until it is; every port configuration of the matrices ran bit-identical
// with SM copies. The older finding stands as well: Why not the proxy under fewer
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
			return 0, diag.Errorc(diag.CodeBadOptions, "cudaexec: unknown PortCopy %d", int(c))
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
		return 0, diag.Errorc(diag.CodeBadOptions, "cudaexec: MSCCL_PORT_COPY=%q: want proxy, sm or auto", v)
	}
	// Every peer this executor reaches is on a device its SMs can store
	// to (one process, one device), so SMs copy unless asked otherwise:
	// the proxy path still hangs now and then at 32 queues (below).
	return PortCopySM, nil
}

// PortCopy reports how this executor moves port channels' bytes.
func (e *Executor) PortCopy() PortCopy { return e.opt.PortCopy }
