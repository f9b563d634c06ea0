package main

import (
	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/ir"
)

// portCopyNote names who moves port channels' bytes when the plan has
// any: the same plan can run through the proxy's copy engines or the
// kernel's own threads (CUDA_DEVICE_MAX_CONNECTIONS, MSCCL_PORT_COPY), and
// a figure must say which.
func portCopyNote(ex *cudaexec.Executor) string {
	for _, g := range ex.Plan().GPUs {
		for _, c := range g.Channels {
			if c.Type == ir.ChanPort {
				return ", port copies by " + ex.PortCopy().String()
			}
		}
	}
	return ""
}
