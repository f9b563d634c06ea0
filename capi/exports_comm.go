package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
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
		return commPrepare(int64(comm), int64(plan), int64(inbytes), int64(outbytes), goString(dtype), goString(op))
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
