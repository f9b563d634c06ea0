package cuda

/*
#include "shim.h"
*/
import "C"

import "errors"

// MemcpyPeerAsync queues a copy of n bytes from src, memory of context
// srcCtx, to dst, memory of dstCtx, on s (a stream of any context of the
// device): how a proxy with a context of its own copies the ranks'
// memory (what proxy.c does for PortCopyProxy, for a proxy written in Go).
func MemcpyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int64, s *Stream) error {
	if err := Init(); err != nil {
		return err
	}
	if dstCtx == nil || srcCtx == nil || dstCtx.h == 0 || srcCtx.h == 0 {
		return errors.New("cuda: cuMemcpyPeerAsync: nil or released context")
	}
	return check("cuMemcpyPeerAsync", C.mc_cuMemcpyPeerAsync(C.uint64_t(dst), dstCtx.h, C.uint64_t(src), srcCtx.h, C.size_t(n), s.handle()))
}
