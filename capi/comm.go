package main

import (
	"context"
	"unsafe"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
)

// commEntry is what a communicator handle stands for: this process's rank
// of a multi-process job. Choosing plans, staging the caller's buffers,
// caching opened plans and serialising calls are the root package's
// (msccl.RankComm.Collective): this file converts arguments only.
type commEntry struct {
	c      *msccl.RankComm
	device string
}

func openComm(device, id string, rank, world int64) (int64, error) {
	if device == "" {
		device = "cpu"
	}
	device, ordinal, err := parseDevice(device)
	if err != nil {
		return 0, err
	}
	opt := msccl.CommOptions{Device: device, CUDADevice: ordinal}
	var c *msccl.RankComm
	if id == "" {
		c, err = msccl.OpenComm(context.Background(), opt)
	} else {
		c, err = msccl.JoinComm(context.Background(), id, int(rank), int(world), opt)
	}
	if err != nil {
		return 0, err
	}
	return table.add(&commEntry{c: c, device: device}), nil
}

func commInfo(h int64) ([]byte, error) {
	c, err := table.comm(h)
	if err != nil {
		return nil, err
	}
	return encodeJSON(map[string]any{"rank": c.c.Rank(), "size": c.c.Size(), "device": c.device}), nil
}

// callArgs are a collective call as C passes it.
type callArgs struct {
	comm, plan        int64 // plan 0: the communicator's choice
	collective        string
	in, out           unsafe.Pointer
	inBytes, outBytes int64
	dtype, op         string
	root              int64
	stream            uint64
	prepare           bool
}

// commCall converts a, then runs (or prepares) it on the communicator.
func commCall(a callArgs) error {
	c, err := table.comm(a.comm)
	if err != nil {
		return err
	}
	cl := msccl.Call{Collective: ir.Collective(a.collective), Root: int(a.root), Stream: uintptr(a.stream)}
	if a.plan != 0 {
		pe, err := table.plan(a.plan)
		if err != nil {
			return err
		}
		cl.Plan = pe.plan
		if a.collective == "" {
			cl.Collective = pe.plan.Collective
		}
	}
	if cl.DType, err = ir.ParseDType(a.dtype); err != nil {
		return invalid("dtype: %v", err)
	}
	cl.Op = ir.ReduceOp(a.op)
	if a.inBytes < 0 || a.outBytes < 0 {
		return invalid("input (%d bytes) or output (%d bytes) is negative", a.inBytes, a.outBytes)
	}
	if !a.prepare && ((a.in == nil && a.inBytes > 0) || (a.out == nil && a.outBytes > 0)) {
		return invalid("input (%d bytes) or output (%d bytes) is NULL", a.inBytes, a.outBytes)
	}
	if a.root < 0 || a.root > int64(c.c.Size()) {
		return invalid("root %d is not a rank of %d", a.root, c.c.Size())
	}
	cl.In, cl.Out = mem(c, a.in, a.inBytes, a.prepare), mem(c, a.out, a.outBytes, a.prepare)
	if a.prepare {
		return c.c.Prepare(cl)
	}
	return c.c.Collective(context.Background(), cl)
}

// mem is n bytes at p, host or device memory as the communicator's
// device takes it. A prepare passes no memory: the lengths say the size.
func mem(c *commEntry, p unsafe.Pointer, n int64, prepare bool) msccl.Mem {
	switch {
	case prepare:
		return msccl.LenOnly(n)
	case c.device == "cuda":
		return msccl.DeviceMem(msccl.DevicePtr(uintptr(p)), n)
	}
	return msccl.HostPtr(p, n)
}

// Close leaves the job: the communicator closes the plans it opened.
func (c *commEntry) Close() error { return c.c.Close() }

func newUniqueID() (string, error) { return msccl.NewUniqueID() }
