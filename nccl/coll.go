package main

import (
	"context"
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// ncclDataType_t: msccl-go's type where it has one, and the element size.
var dataTypes = []struct {
	name   string
	dt     msccl.DType
	native bool // msccl-go has the type
	size   int64
}{
	{"ncclInt8", 0, false, 1}, {"ncclUint8", msccl.U8, true, 1}, {"ncclInt32", msccl.I32, true, 4}, {"ncclUint32", msccl.U32, true, 4},
	{"ncclInt64", 0, false, 8}, {"ncclUint64", 0, false, 8}, {"ncclFloat16", msccl.F16, true, 2}, {"ncclFloat32", msccl.F32, true, 4},
	{"ncclFloat64", 0, false, 8}, {"ncclBfloat16", msccl.BF16, true, 2}, {"ncclFloat8e4m3", msccl.F8E4M3, true, 1}, {"ncclFloat8e5m2", msccl.F8E5M2, true, 1},
}

// NCCL's built-in reductions (ncclRedOp_t below ncclNumOps).
const (
	opSum, opProd, opMax, opMin, opAvg, numOps = 0, 1, 2, 3, 4, 5
)

var opNames = []string{"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"}

// preMulSum is an operator of ncclRedOpCreatePreMulSum: sum after each
// rank multiplies its input by scalar.
type preMulSum struct {
	dt        int
	residence int            // ncclScalarResidence_t
	scalar    unsafe.Pointer // read at each call (ncclScalarDevice)
	value     float64        // ncclScalarHostImmediate: read at creation
	copy      [8]byte        // and its bytes, for the real NCCL's operator
	atCreate  bool
	real      int  // the real NCCL's operator on the shadow (handover.go)
	hasReal   bool // real is made
}

// call is one NCCL call, converted: the collective on this rank's
// buffers, or a send or receive.
type call struct {
	c        *ncComm
	name     string // NCCL's function, for messages
	coll     msccl.Collective
	send     unsafe.Pointer
	recv     unsafe.Pointer
	sendN    int64 // bytes
	recvN    int64
	dtype    int
	op       int
	root     int
	peer     int
	stream   unsafe.Pointer
	p2p      int // 0: a collective; 1: a send; 2: a receive
	reducing bool
	reason   string // why msccl-go does not run it (handOverReason), or ""
}

func (k *call) typeErr() error {
	if k.dtype < 0 || k.dtype >= len(dataTypes) {
		return errorf(ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", k.name, k.dtype)
	}
	return nil
}

// mem is n bytes at p as the communicator's device takes them.
func (k *call) mem(p unsafe.Pointer, n int64) msccl.Mem {
	if p == nil || n == 0 {
		return msccl.Mem{}
	}
	if k.c.device == "cuda" {
		return msccl.DeviceMem(*(*msccl.DevicePtr)(unsafe.Pointer(&p)), n)
	}
	return msccl.HostPtr(p, n)
}

func (k *call) streamOpt() []msccl.CallOption {
	if k.c.device != "cuda" {
		return nil // the cpu device runs on the calling thread
	}
	return []msccl.CallOption{msccl.OnStream(uintptr(k.stream))}
}

// check refuses what NCCL refuses before anything runs.
func (k *call) check() error {
	if err := k.typeErr(); err != nil {
		return err
	}
	n := k.c.rc.Size()
	if k.coll.Rooted() && (k.root < 0 || k.root >= n) {
		return errorf(ncclInvalidArgument, "%s: root %d is not a rank of %d", k.name, k.root, n)
	}
	if k.p2p != 0 && (k.peer < 0 || k.peer >= n) {
		return errorf(ncclInvalidArgument, "%s: peer %d is not a rank of %d", k.name, k.peer, n)
	}
	if k.reducing {
		if k.op < 0 || (k.op >= numOps && !k.c.hasOp(k.op)) {
			return errorf(ncclInvalidArgument, "%s: op %d is not an ncclRedOp_t of this communicator", k.name, k.op)
		}
	}
	me := k.c.rc.Rank()
	needSend := k.sendN > 0 && (k.p2p == 1 || (k.p2p == 0 && (!k.coll.Rooted() || k.root == me || k.coll == ir.Reduce || k.coll == ir.Gather)))
	needRecv := k.recvN > 0 && (k.p2p == 2 || (k.p2p == 0 && (!k.coll.Rooted() || k.root == me || k.coll == ir.Broadcast || k.coll == ir.Scatter)))
	if (needSend && k.send == nil) || (needRecv && k.recv == nil) {
		return errorf(ncclInvalidArgument, "%s: sendbuff or recvbuff is NULL", k.name)
	}
	return nil
}

// onCThread is the context of a call run on the C caller's thread: its
// goroutine is locked to that thread, which the cpu device's waits must
// know (cpudev.WithLockedThread).
var onCThread = cpudev.WithLockedThread(context.Background())

// run runs k now, in ctx (onCThread on the caller's thread).
func (k *call) run(ctx context.Context) error {
	rc := k.c.rc
	switch k.p2p {
	case 1:
		return rc.SendBuf(ctx, k.mem(k.send, k.sendN), k.peer, k.streamOpt()...)
	case 2:
		return rc.RecvBuf(ctx, k.mem(k.recv, k.recvN), k.peer, k.streamOpt()...)
	}
	if k.sendN == 0 && k.recvN == 0 {
		return nil
	}
	me := rc.Rank()
	cl := msccl.Call{Collective: k.coll, In: k.mem(k.send, k.sendN), Out: k.mem(k.recv, k.recvN), Root: k.root}
	// Off the root, the buffer NCCL ignores is not touched.
	if k.coll.Rooted() && me != k.root {
		switch k.coll {
		case ir.Broadcast, ir.Scatter:
			cl.In = msccl.Mem{}
		case ir.Reduce, ir.Gather:
			cl.Out = msccl.Mem{}
		}
	}
	if !k.reducing || (rc.Size() == 1 && k.op < numOps) {
		// Data movement only (a reduction over one rank is a copy too):
		// every type is its bytes.
		cl.DType = msccl.U8
		return k.issue(ctx, cl)
	}
	// handOverReason has sent every other type and reduction to the
	// real NCCL.
	dt := dataTypes[k.dtype]
	cl.DType = dt.dt
	switch k.op {
	case opSum:
		cl.Op = msccl.Sum
	case opMin:
		cl.Op = msccl.Min
	case opMax:
		cl.Op = msccl.Max
	case opProd:
		cl.Op = msccl.Prod
	default:
		return k.scaled(ctx, cl)
	}
	return k.issue(ctx, cl)
}

func (k *call) issue(ctx context.Context, cl msccl.Call) error {
	// The field, not OnStream: an option takes cl's address and would
	// move it to the heap on every call.
	if k.c.device == "cuda" {
		cl.Stream = uintptr(k.stream)
	}
	return k.c.rc.Collective(ctx, cl)
}

// scaled runs ncclAvg (a sum, then the result divided by the ranks) and
// PreMulSum (each input multiplied by the scalar, then a sum) on f32 on
// the cpu device, where the scaling is a loop over host memory (the
// other devices and types hand them over: handOverReason).
func (k *call) scaled(ctx context.Context, cl msccl.Call) error {
	cl.Op = msccl.Sum
	if k.op == opAvg {
		if err := k.issue(ctx, cl); err != nil {
			return err
		}
		if cl.Out.Len() > 0 {
			scaleF32(unsafe.Slice((*byte)(k.recv), k.recvN), 1/float32(k.c.rc.Size()))
		}
		return nil
	}
	pm, _ := k.c.op(k.op)
	s := float32(pm.value)
	if !pm.atCreate {
		s = math.Float32frombits(binary.LittleEndian.Uint32(unsafe.Slice((*byte)(pm.scalar), 4)))
	}
	if cl.In.Len() > 0 {
		tmp := make([]byte, k.sendN)
		copy(tmp, unsafe.Slice((*byte)(k.send), k.sendN))
		scaleF32(tmp, s)
		cl.In = msccl.HostMem(tmp)
	}
	return k.issue(ctx, cl)
}

func scaleF32(b []byte, s float32) {
	for i := 0; i+4 <= len(b); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v*s))
	}
}

func (c *ncComm) hasOp(op int) bool {
	_, ok := c.op(op)
	return ok
}

func (c *ncComm) op(op int) (preMulSum, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pm, ok := c.ops[op]
	return pm, ok
}
