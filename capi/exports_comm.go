package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/msccl-go/msccl-go"
)

// msccl_comm_prepare readies plan's collective on this rank for a later
// msccl_comm_run with the same byte counts, dtype and op, without running
// it: the rank's registered buffers for that size, and on the cuda device
// the op tables and kernel. A CUDA graph capture may contain only
// prepared runs (capture cannot allocate); the first run outside capture
// prepares too. Every rank calls it, in the same order as its runs.
//
//export msccl_comm_prepare
func msccl_comm_prepare(comm C.int64_t, plan C.int64_t, inbytes C.size_t, outbytes C.size_t, dtype *C.char, op *C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		return commCall(callArgs{comm: int64(comm), plan: int64(plan), inBytes: int64(inbytes), outBytes: int64(outbytes),
			dtype: goString(dtype), op: goString(op), prepare: true})
	})
	return finish(errmsg, st, msg)
}

// msccl_comm_call runs (prepare 0) or readies (prepare 1, in and out
// unused) collective ("allreduce", "allgather", "reducescatter",
// "alltoall", "broadcast", "reduce", "gather", "scatter") on this rank:
// with plan 0 the communicator picks the proven plan (the selection
// table's, or the library's rooted algorithm for root), else plan runs.
// Buffers, dtype, op and stream as msccl_comm_run; off the root, the
// buffer NCCL ignores (broadcast's and scatter's input, reduce's and
// gather's output) may be NULL with 0 bytes. A world of one rank copies
// the input to the output.
//
//export msccl_comm_call
func msccl_comm_call(comm C.int64_t, collective *C.char, plan C.int64_t, in unsafe.Pointer, inbytes C.size_t, out unsafe.Pointer, outbytes C.size_t, dtype *C.char, op *C.char, root C.int64_t, stream C.uint64_t, prepare C.int, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		return commCall(callArgs{comm: int64(comm), collective: goString(collective), plan: int64(plan), in: in, inBytes: int64(inbytes), out: out, outBytes: int64(outbytes),
			dtype: goString(dtype), op: goString(op), root: int64(root), stream: uint64(stream), prepare: prepare != 0})
	})
	return finish(errmsg, st, msg)
}

// msccl_comm_select stores in *plan a new handle to the proven library
// plan for collective on this communicator's ranks at size bytes, as
// msccl_select, except that a size outside the plan's size rule is
// accepted when msccl_comm_run serves it padded to the next size the rule
// admits (a tensor of 1000003 floats).
//
//export msccl_comm_select
func msccl_comm_select(comm C.int64_t, collective *C.char, size C.int64_t, plan *C.int64_t, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if plan == nil {
			return invalid("msccl_comm_select: plan is NULL")
		}
		*plan = 0
		c, err := table.comm(int64(comm))
		if err != nil {
			return err
		}
		if size <= 0 {
			return invalid("message size must be positive, got %d", int64(size))
		}
		p, err := msccl.SelectPlanStaged("", goString(collective), c.c.Size(), int64(size))
		if err != nil {
			return err
		}
		*plan = C.int64_t(table.add(&planEntry{plan: p}))
		return nil
	})
	return finish(errmsg, st, msg)
}
