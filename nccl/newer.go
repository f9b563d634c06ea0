package main

/*
#include <stdint.h>
#include <stdlib.h>

// ncclSimInfo_t's leading fields (nccl.h).
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} msccl_siminfo;
*/
import "C"

import (
	"unsafe"
)

// The calls of NCCL 2.27-2.28 that PyTorch imports (nm -D
// libtorch_cuda.so, docs/evidence/gpu_nccl_torch_mps4_h100.log) beyond
// the classic API. Each is exported so that no call hands one of our
// communicators to the real NCCL: shrinking is a split; windows are
// registrations (the communicator stages caller buffers); the device
// API and group simulation are refused with the reason.

// ncclCommShrink makes the communicator of c's ranks not in exclude, in
// their order: a split in which the excluded ranks take no part
// (NCCL_SPLIT_NOCOLOR) and the others keep their relative order.
//
//export ncclCommShrink
func ncclCommShrink(comm unsafe.Pointer, excludeRanksList *C.int, excludeRanksCount C.int, newcomm *unsafe.Pointer, config unsafe.Pointer, shrinkFlags C.int) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return guard(c, func() error {
		if newcomm == nil || (excludeRanksCount > 0 && excludeRanksList == nil) || excludeRanksCount < 0 {
			return errorf(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL, or excludeRanksList does not hold %d ranks", int(excludeRanksCount))
		}
		*newcomm = nil
		me := c.rc.Rank()
		color := 0
		if excludeRanksCount > 0 {
			for _, r := range unsafe.Slice(excludeRanksList, int(excludeRanksCount)) {
				if int(r) < 0 || int(r) >= c.rc.Size() {
					return errorf(ncclInvalidArgument, "ncclCommShrink: rank %d is not a rank of %d", int(r), c.rc.Size())
				}
				if int(r) == me {
					color = -1
				}
			}
		}
		nc, err := split(c, color, me)
		if err != nil || nc == nil {
			return err
		}
		*newcomm = handleOf(nc)
		return nil
	})
}

//export ncclCommWindowRegister
func ncclCommWindowRegister(comm unsafe.Pointer, buff unsafe.Pointer, size C.size_t, win *unsafe.Pointer, winFlags C.int) C.int {
	return ncclCommRegister(comm, buff, size, win)
}

//export ncclCommWindowDeregister
func ncclCommWindowDeregister(comm unsafe.Pointer, win unsafe.Pointer) C.int {
	return ncclCommDeregister(comm, win)
}

//export ncclDevCommCreate
func ncclDevCommCreate(comm unsafe.Pointer, reqs unsafe.Pointer, outDevComm unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return record(c, errorf(ncclInvalidUsage, "ncclDevCommCreate: NCCL's device API (kernels that communicate themselves) is not msccl-go's; its plans run in msccl-go's own kernel"))
}

//export ncclDevCommDestroy
func ncclDevCommDestroy(comm unsafe.Pointer, devComm unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return record(c, errorf(ncclInvalidUsage, "ncclDevCommDestroy: no ncclDevComm was made (ncclDevCommCreate is refused)"))
}

// ncclGroupSimulateEnd ends the group like ncclGroupEnd but runs
// nothing, as NCCL's does; msccl-go has no cost model for a group, so
// the estimate is left undefined (NCCL_UNDEF_FLOAT) and the call says so.
//
//export ncclGroupSimulateEnd
func ncclGroupSimulateEnd(simInfo *C.msccl_siminfo) C.int {
	id, depth := leaveGroup()
	if depth < 0 {
		return record(nil, errorf(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart"))
	}
	if depth == 0 {
		groups.mu.Lock()
		delete(groups.ops, id)
		groups.mu.Unlock()
	}
	if simInfo != nil {
		simInfo.estimatedTime = -1
	}
	return record(nil, errorf(ncclInvalidUsage, "ncclGroupSimulateEnd: msccl-go has no cost model for a group; the group was ended and nothing ran"))
}
