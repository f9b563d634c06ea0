package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;

// ncclConfig_t's leading fields, the ones read here (nccl.h has all).
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} msccl_config_head;

// Group depth and the open group's number are per thread, as NCCL's
// ncclGroupStart/End are.
static __thread int msccl_group_depth;
static __thread long long msccl_group_id;
static int msccl_group_enter(long long fresh) {
  if (msccl_group_depth++ == 0) msccl_group_id = fresh;
  return msccl_group_depth;
}
static int msccl_group_leave(void) { return msccl_group_depth > 0 ? --msccl_group_depth : -1; }
static int msccl_group_open(void) { return msccl_group_depth; }
static long long msccl_group_current(void) { return msccl_group_id; }
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
)

// main is required by -buildmode=c-shared and never runs.
func main() {}

const versionCode = 22800 // NCCL 2.28.0

//export ncclGetVersion
func ncclGetVersion(version *C.int) C.int {
	return guard(nil, func() error {
		if version == nil {
			return errorf(ncclInvalidArgument, "ncclGetVersion: version is NULL")
		}
		*version = versionCode
		return nil
	})
}

//export ncclGetErrorString
func ncclGetErrorString(result C.int) *C.char {
	return cString(resultString(int(result)))
}

func resultString(r int) string {
	if s, ok := resultStrings[r]; ok {
		return s
	}
	return "unknown result code"
}

// cStrings holds the C copies of constant strings, made once each.
var cStrings sync.Map

func cString(s string) *C.char {
	if v, ok := cStrings.Load(s); ok {
		return v.(*C.char)
	}
	v, _ := cStrings.LoadOrStore(s, C.CString(s))
	return v.(*C.char)
}

//export ncclGetLastError
func ncclGetLastError(comm unsafe.Pointer) *C.char {
	if v, ok := comms.Load(uintptr(comm)); ok && comm != nil {
		c := v.(*ncComm)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.last != nil {
			return c.last
		}
		return cString("")
	}
	lastError.mu.Lock()
	defer lastError.mu.Unlock()
	if lastError.global == nil {
		return cString("")
	}
	return lastError.global
}

//export ncclGetUniqueId
func ncclGetUniqueId(uniqueId *C.ncclUniqueId) C.int {
	return guard(nil, func() error {
		if uniqueId == nil {
			return errorf(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL")
		}
		id, err := msccl.NewUniqueID()
		if err != nil {
			return err
		}
		if len(id) >= 128 {
			return errorf(ncclInternalError, "ncclGetUniqueId: the rendezvous id is %d bytes; an ncclUniqueId holds 127", len(id))
		}
		b := (*[128]byte)(unsafe.Pointer(uniqueId))
		*b = [128]byte{}
		copy(b[:], id)
		return nil
	})
}

//export ncclCommInitRank
func ncclCommInitRank(comm *unsafe.Pointer, nranks C.int, commId C.ncclUniqueId, rank C.int) C.int {
	return commInit("ncclCommInitRank", comm, nranks, commId, rank, nil)
}

//export ncclCommInitRankConfig
func ncclCommInitRankConfig(comm *unsafe.Pointer, nranks C.int, commId C.ncclUniqueId, rank C.int, config *C.msccl_config_head) C.int {
	return commInit("ncclCommInitRankConfig", comm, nranks, commId, rank, config)
}

func commInit(name string, comm *unsafe.Pointer, nranks C.int, commId C.ncclUniqueId, rank C.int, config *C.msccl_config_head) C.int {
	return guard(nil, func() error {
		if comm == nil {
			return errorf(ncclInvalidArgument, "%s: comm is NULL", name)
		}
		*comm = nil
		if config != nil && (uint32(config.magic) != 0xcafebeef || config.size < C.size_t(unsafe.Sizeof(*config))) {
			return errorf(ncclInvalidArgument, "%s: config is not initialised with NCCL_CONFIG_INITIALIZER", name)
		}
		idb := *(*[128]byte)(unsafe.Pointer(&commId))
		id, err := idString(&idb)
		if err != nil {
			return err
		}
		in := &pendingInit{id: id, nranks: int(nranks), rank: int(rank), out: comm}
		if queue(groupOp{init: in}) {
			return nil
		}
		c, err := initRank(id, in.nranks, in.rank, "")
		if err != nil {
			return err
		}
		*comm = handleOf(c)
		return nil
	})
}

// pendingInit is an ncclCommInitRank inside a group, run at its end.
type pendingInit struct {
	id           string
	nranks, rank int
	out          *unsafe.Pointer
	c            *ncComm
}

//export ncclCommInitRankScalable
func ncclCommInitRankScalable(comm *unsafe.Pointer, nranks C.int, rank C.int, nId C.int, commIds *C.ncclUniqueId, config *C.msccl_config_head) C.int {
	// Several ids spread NCCL's own rendezvous over several roots; ours
	// has one root, so the first id serves (every rank passes the same
	// list).
	if nId < 1 || commIds == nil {
		return record(nil, errorf(ncclInvalidArgument, "ncclCommInitRankScalable: nId %d or commIds NULL", int(nId)))
	}
	return commInit("ncclCommInitRankScalable", comm, nranks, *commIds, rank, config)
}

//export ncclCommInitAll
func ncclCommInitAll(comm *unsafe.Pointer, ndev C.int, devlist *C.int) C.int {
	return guard(nil, func() error {
		if comm == nil || ndev < 1 {
			return errorf(ncclInvalidArgument, "ncclCommInitAll: comm is NULL or ndev %d < 1", int(ndev))
		}
		id, err := msccl.NewUniqueID()
		if err != nil {
			return err
		}
		n := int(ndev)
		out := unsafe.Slice(comm, n)
		var devs []C.int
		if devlist != nil {
			devs = unsafe.Slice(devlist, n)
		}
		made := make([]*ncComm, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ord := fmt.Sprint(r)
				if devs != nil {
					ord = fmt.Sprint(int(devs[r]))
				}
				made[r], errs[r] = initRank(id, n, r, ord)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			for _, c := range made {
				if c != nil {
					c.rc.Close()
				}
			}
			return err
		}
		newFamily(made)
		for r, c := range made {
			out[r] = handleOf(c)
		}
		return nil
	})
}

//export ncclCommSplit
func ncclCommSplit(comm unsafe.Pointer, color C.int, key C.int, newcomm *unsafe.Pointer, config *C.msccl_config_head) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return guard(c, func() error {
		if newcomm == nil {
			return errorf(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL")
		}
		*newcomm = nil
		if color < -1 {
			return errorf(ncclInvalidArgument, "ncclCommSplit: color %d: want >= 0, or NCCL_SPLIT_NOCOLOR (-1)", int(color))
		}
		nc, err := split(c, int(color), int(key))
		if err != nil || nc == nil {
			return err
		}
		*newcomm = handleOf(nc)
		return nil
	})
}

//export ncclCommFinalize
func ncclCommFinalize(comm unsafe.Pointer) C.int {
	// Every call has been issued by the time it returned (the cpu device
	// has run it; the cuda device has queued it on the caller's stream),
	// so nothing of ours is left to flush; the real NCCL's shadow, if
	// calls were handed to it, is finalized.
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return guard(c, c.finalizeShadow)
}

//export ncclCommDestroy
func ncclCommDestroy(comm unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return guard(nil, func() error { return destroy(comm, c) })
}

//export ncclCommAbort
func ncclCommAbort(comm unsafe.Pointer) C.int {
	if comm == nil {
		return ncclSuccess // NCCL: aborting NULL is a no-op
	}
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return guard(nil, func() error {
		abort(comm, c)
		return nil
	})
}

//export ncclCommGetAsyncError
func ncclCommGetAsyncError(comm unsafe.Pointer, asyncError *C.int) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	if asyncError == nil {
		return record(c, errorf(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL"))
	}
	c.mu.Lock()
	*asyncError = C.int(c.async)
	c.mu.Unlock()
	return ncclSuccess
}

// commInt is one of the ncclComm* queries storing an int.
func commInt(name string, comm unsafe.Pointer, out *C.int, get func(*ncComm) int) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	if out == nil {
		return record(c, errorf(ncclInvalidArgument, "%s: the output is NULL", name))
	}
	*out = C.int(get(c))
	return ncclSuccess
}

//export ncclCommCount
func ncclCommCount(comm unsafe.Pointer, count *C.int) C.int {
	return commInt("ncclCommCount", comm, count, func(c *ncComm) int { return c.rc.Size() })
}

//export ncclCommUserRank
func ncclCommUserRank(comm unsafe.Pointer, rank *C.int) C.int {
	return commInt("ncclCommUserRank", comm, rank, func(c *ncComm) int { return c.rc.Rank() })
}

//export ncclCommCuDevice
func ncclCommCuDevice(comm unsafe.Pointer, device *C.int) C.int {
	// -1 on the cpu device, which has no GPU.
	return commInt("ncclCommCuDevice", comm, device, func(c *ncComm) int { return c.cuda })
}

// Registration: the communicator stages caller buffers into its own
// registered ones (docs/rationale.md says why), so registering a buffer
// has nothing to do; the handle is remembered so that deregistering one
// never made is refused.
var registered sync.Map // handle -> struct{}

//export ncclCommRegister
func ncclCommRegister(comm unsafe.Pointer, buff unsafe.Pointer, size C.size_t, handle *unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	if handle == nil || buff == nil {
		return record(c, errorf(ncclInvalidArgument, "ncclCommRegister: buff or handle is NULL"))
	}
	h := C.malloc(1)
	registered.Store(uintptr(h), struct{}{})
	*handle = h
	return ncclSuccess
}

//export ncclCommDeregister
func ncclCommDeregister(comm unsafe.Pointer, handle unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	if _, ok := registered.LoadAndDelete(uintptr(handle)); !ok {
		return record(c, errorf(ncclInvalidArgument, "ncclCommDeregister: %p is not a handle of ncclCommRegister", handle))
	}
	C.free(handle)
	return ncclSuccess
}

//export ncclMemAlloc
func ncclMemAlloc(ptr *unsafe.Pointer, size C.size_t) C.int {
	return guard(nil, func() error {
		if ptr == nil || size == 0 {
			return errorf(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL or size is 0")
		}
		dev, err := deviceOf()
		if err != nil {
			return err
		}
		p, err := memAlloc(dev, int64(size))
		*ptr = p
		return err
	})
}

//export ncclMemFree
func ncclMemFree(ptr unsafe.Pointer) C.int {
	return guard(nil, func() error {
		dev, err := deviceOf()
		if err != nil {
			return err
		}
		return memFree(dev, ptr)
	})
}

//export ncclRedOpCreatePreMulSum
func ncclRedOpCreatePreMulSum(op *C.int, scalar unsafe.Pointer, datatype C.int, residence C.int, comm unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return guard(c, func() error {
		if op == nil || scalar == nil {
			return errorf(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL")
		}
		if datatype < 0 || int(datatype) >= len(dataTypes) {
			return errorf(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype %d is not an ncclDataType_t", int(datatype))
		}
		pm := preMulSum{dt: int(datatype), residence: int(residence), scalar: scalar, atCreate: residence == 1}
		if pm.atCreate {
			copy(pm.copy[:], unsafe.Slice((*byte)(scalar), dataTypes[pm.dt].size))
			if dataTypes[pm.dt].native && dataTypes[pm.dt].dt == msccl.F32 {
				pm.value = float64(math.Float32frombits(binary.LittleEndian.Uint32(pm.copy[:])))
			}
		}
		c.mu.Lock()
		id := c.nextOp
		c.nextOp++
		c.ops[id] = pm
		c.mu.Unlock()
		*op = C.int(id)
		return nil
	})
}

//export ncclRedOpDestroy
func ncclRedOpDestroy(op C.int, comm unsafe.Pointer) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	c.mu.Lock()
	pm, ok := c.ops[int(op)]
	delete(c.ops, int(op))
	c.mu.Unlock()
	if !ok {
		return record(c, errorf(ncclInvalidArgument, "ncclRedOpDestroy: op %d was not made by ncclRedOpCreatePreMulSum on this communicator", int(op)))
	}
	return record(c, c.dropRealOp(pm))
}

// collective checks and runs (or, inside a group, queues) one call.
func collective(comm unsafe.Pointer, k call) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	k.c = c
	return guard(c, func() error {
		if err := k.check(); err != nil {
			return err
		}
		k.reason = k.handOverReason()
		if groups.open.Load() > 0 {
			// The group keeps a copy, so that k itself need not live
			// on the heap in the common, ungrouped call.
			kq := k
			if queue(groupOp{k: &kq}) {
				return nil
			}
		}
		if k.reason != "" {
			return handOver(&k, k.reason)
		}
		return k.run(onCThread)
	})
}

func elems(dt C.int, count C.size_t) int64 {
	if dt < 0 || int(dt) >= len(dataTypes) || uint64(count) > math.MaxInt64/8 {
		return 0 // check refuses the type; the count cannot be this large
	}
	return int64(count) * dataTypes[dt].size
}

//export ncclAllReduce
func ncclAllReduce(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, op C.int, comm, stream unsafe.Pointer) C.int {
	n := elems(datatype, count)
	return collective(comm, call{name: "ncclAllReduce", coll: ir.AllReduce, send: sendbuff, recv: recvbuff, sendN: n, recvN: n, dtype: int(datatype), op: int(op), stream: stream, reducing: true})
}

//export ncclReduce
func ncclReduce(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, op C.int, root C.int, comm, stream unsafe.Pointer) C.int {
	n := elems(datatype, count)
	return collective(comm, call{name: "ncclReduce", coll: ir.Reduce, send: sendbuff, recv: recvbuff, sendN: n, recvN: n, dtype: int(datatype), op: int(op), root: int(root), stream: stream, reducing: true})
}

//export ncclBroadcast
func ncclBroadcast(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype C.int, root C.int, comm, stream unsafe.Pointer) C.int {
	n := elems(datatype, count)
	return collective(comm, call{name: "ncclBroadcast", coll: ir.Broadcast, send: sendbuff, recv: recvbuff, sendN: n, recvN: n, dtype: int(datatype), root: int(root), stream: stream})
}

//export ncclBcast
func ncclBcast(buff unsafe.Pointer, count C.size_t, datatype C.int, root C.int, comm, stream unsafe.Pointer) C.int {
	// NCCL's older, in-place broadcast.
	n := elems(datatype, count)
	return collective(comm, call{name: "ncclBcast", coll: ir.Broadcast, send: buff, recv: buff, sendN: n, recvN: n, dtype: int(datatype), root: int(root), stream: stream})
}

//export ncclReduceScatter
func ncclReduceScatter(sendbuff, recvbuff unsafe.Pointer, recvcount C.size_t, datatype, op C.int, comm, stream unsafe.Pointer) C.int {
	return sized(comm, func(ranks int64) call {
		n := elems(datatype, recvcount)
		return call{name: "ncclReduceScatter", coll: ir.ReduceScatter, send: sendbuff, recv: recvbuff, sendN: n * ranks, recvN: n, dtype: int(datatype), op: int(op), stream: stream, reducing: true}
	})
}

//export ncclAllGather
func ncclAllGather(sendbuff, recvbuff unsafe.Pointer, sendcount C.size_t, datatype C.int, comm, stream unsafe.Pointer) C.int {
	return sized(comm, func(ranks int64) call {
		n := elems(datatype, sendcount)
		return call{name: "ncclAllGather", coll: ir.AllGather, send: sendbuff, recv: recvbuff, sendN: n, recvN: n * ranks, dtype: int(datatype), stream: stream}
	})
}

//export ncclAlltoAll
func ncclAlltoAll(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype C.int, comm, stream unsafe.Pointer) C.int {
	return sized(comm, func(ranks int64) call {
		n := elems(datatype, count) * ranks
		return call{name: "ncclAlltoAll", coll: ir.AllToAll, send: sendbuff, recv: recvbuff, sendN: n, recvN: n, dtype: int(datatype), stream: stream}
	})
}

//export ncclGather
func ncclGather(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype C.int, root C.int, comm, stream unsafe.Pointer) C.int {
	return sized(comm, func(ranks int64) call {
		n := elems(datatype, count)
		return call{name: "ncclGather", coll: ir.Gather, send: sendbuff, recv: recvbuff, sendN: n, recvN: n * ranks, dtype: int(datatype), root: int(root), stream: stream}
	})
}

//export ncclScatter
func ncclScatter(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype C.int, root C.int, comm, stream unsafe.Pointer) C.int {
	return sized(comm, func(ranks int64) call {
		n := elems(datatype, count)
		return call{name: "ncclScatter", coll: ir.Scatter, send: sendbuff, recv: recvbuff, sendN: n * ranks, recvN: n, dtype: int(datatype), root: int(root), stream: stream}
	})
}

// sized is a collective whose buffer lengths depend on the ranks.
func sized(comm unsafe.Pointer, make func(ranks int64) call) C.int {
	c, err := lookup(comm)
	if err != nil {
		return record(nil, err)
	}
	return collective(comm, make(int64(c.rc.Size())))
}

//export ncclSend
func ncclSend(sendbuff unsafe.Pointer, count C.size_t, datatype C.int, peer C.int, comm, stream unsafe.Pointer) C.int {
	return collective(comm, call{name: "ncclSend", send: sendbuff, sendN: elems(datatype, count), dtype: int(datatype), peer: int(peer), stream: stream, p2p: 1})
}

//export ncclRecv
func ncclRecv(recvbuff unsafe.Pointer, count C.size_t, datatype C.int, peer C.int, comm, stream unsafe.Pointer) C.int {
	return collective(comm, call{name: "ncclRecv", recv: recvbuff, recvN: elems(datatype, count), dtype: int(datatype), peer: int(peer), stream: stream, p2p: 2})
}

// Groups. Between ncclGroupStart and the matching ncclGroupEnd of a
// thread, calls are checked and queued; ncclGroupEnd runs them as NCCL
// defines a group: communicator inits together (they wait for each
// other), then every send (which only queues its data), the collectives
// in call order, and the receives last, so that no receive waits for a
// send its peer queued after it.
type groupOp struct {
	init *pendingInit
	k    *call
}

var groups struct {
	mu   sync.Mutex
	ops  map[int64][]groupOp
	next atomic.Int64
	// open counts the groups open on all threads: while it is 0 a call
	// skips asking C for its thread's depth (a cgo call on every
	// collective).
	open atomic.Int64
}

// queue adds op to this thread's open group, if one is open.
func queue(op groupOp) bool {
	if groups.open.Load() == 0 || C.msccl_group_open() == 0 {
		return false
	}
	id := int64(C.msccl_group_current())
	groups.mu.Lock()
	defer groups.mu.Unlock()
	if groups.ops == nil {
		groups.ops = map[int64][]groupOp{}
	}
	groups.ops[id] = append(groups.ops[id], op)
	return true
}

//export ncclGroupStart
func ncclGroupStart() C.int {
	groups.open.Add(1)
	C.msccl_group_enter(C.longlong(groups.next.Add(1)))
	return ncclSuccess
}

// leaveGroup closes this thread's innermost group: the group's number
// and the depth left (-1: no group was open).
func leaveGroup() (id int64, depth int) {
	id = int64(C.msccl_group_current())
	depth = int(C.msccl_group_leave())
	if depth >= 0 {
		groups.open.Add(-1)
	}
	return id, depth
}

//export ncclGroupEnd
func ncclGroupEnd() C.int {
	id, depth := leaveGroup()
	if depth < 0 {
		return record(nil, errorf(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart"))
	}
	if depth > 0 {
		return ncclSuccess
	}
	groups.mu.Lock()
	ops := groups.ops[id]
	delete(groups.ops, id)
	groups.mu.Unlock()
	return guard(nil, func() error { return runGroup(ops) })
}

func runGroup(ops []groupOp) error {
	var inits []*pendingInit
	var sends, colls, recvs, real []*call
	for _, op := range ops {
		switch {
		case op.init != nil:
			inits = append(inits, op.init)
		case op.k.reason != "":
			real = append(real, op.k)
		case op.k.p2p == 1:
			sends = append(sends, op.k)
		case op.k.p2p == 2:
			recvs = append(recvs, op.k)
		default:
			colls = append(colls, op.k)
		}
	}
	errs := make([]error, len(inits))
	var wg sync.WaitGroup
	for i, in := range inits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.c, errs[i] = initRank(in.id, in.nranks, in.rank, "")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, in := range inits {
			if in.c != nil {
				in.c.rc.Close()
			}
		}
		return err
	}
	// Ranks of one job made here are destroyed together (family).
	byID := map[string][]*ncComm{}
	for _, in := range inits {
		byID[in.id] = append(byID[in.id], in.c)
	}
	for _, cs := range byID {
		if len(cs) > 1 {
			newFamily(cs)
		}
	}
	for _, in := range inits {
		*in.out = handleOf(in.c)
	}
	// The collectives of different communicators of one group (one
	// thread driving several ranks) must run at once: each waits for
	// its peers.
	for _, batch := range [][]*call{sends, colls, recvs} {
		if err := runBatch(batch); err != nil {
			return err
		}
	}
	// The calls msccl-go does not run go to the real NCCL last, as one
	// group of its own, from this thread (the real NCCL uses the
	// thread's current GPU).
	if len(real) > 0 {
		return handOverGroup(real)
	}
	return nil
}

// runBatch runs calls in order per communicator, communicators at once;
// it runs on the C caller's thread (ncclGroupEnd).
func runBatch(calls []*call) error {
	per := map[*ncComm][]*call{}
	var order []*ncComm
	for _, k := range calls {
		if per[k.c] == nil {
			order = append(order, k.c)
		}
		per[k.c] = append(per[k.c], k)
	}
	if len(order) == 1 {
		// One communicator: its calls run on this thread, as an
		// ungrouped call does, rather than on a goroutine that this
		// locked thread would sleep to wait for (a hand-off each way).
		return runOn(onCThread, order[0], calls)
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, c := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runOn(context.Background(), c, per[c])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runOn runs c's calls in order, in ctx; the first error is recorded on
// c and ends them.
func runOn(ctx context.Context, c *ncComm, calls []*call) error {
	for _, k := range calls {
		if err := k.run(ctx); err != nil {
			record(c, err)
			return err
		}
	}
	return nil
}
