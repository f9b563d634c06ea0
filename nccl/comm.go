package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go"
)

// ncComm is what an ncclComm_t stands for. The ncclComm_t itself is a
// byte of C memory whose address keys the table: no Go pointer reaches C,
// and a pointer the library never made (or one destroyed) is found
// missing, not followed.
type ncComm struct {
	rc     *msccl.RankComm
	device string
	cuda   int // the GPU ordinal on the cuda device; -1 when not known

	// family: the other ranks of this communicator's job in this
	// process (ncclCommInitAll, or inits in one group), or nil.
	family *family

	mu      sync.Mutex
	last    *C.char // ncclGetLastError of this communicator
	async   int     // ncclCommGetAsyncError
	ops     map[int]preMulSum
	nextOp  int
	aborted bool

	// The real NCCL's communicator shadowing this one (handover.go):
	// nil until the first call msccl-go does not run; realErr when
	// making it failed. plans: handOverReason's verdicts per size.
	real    unsafe.Pointer
	realErr error
	plans   map[planKey]string
}

var comms sync.Map // uintptr(ncclComm_t) -> *ncComm

func (c *ncComm) setLastError(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil {
		C.free(unsafe.Pointer(c.last))
	}
	c.last = C.CString(msg)
}

func (c *ncComm) setAsync(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.async == ncclSuccess {
		c.async = code
	}
}

// lookup is the communicator comm stands for.
func lookup(comm unsafe.Pointer) (*ncComm, error) {
	if comm == nil {
		return nil, errorf(ncclInvalidArgument, "comm is NULL")
	}
	v, ok := comms.Load(uintptr(comm))
	if !ok {
		return nil, errorf(ncclInvalidArgument, "comm %p is not a communicator of this library (destroyed already, or never made)", comm)
	}
	c := v.(*ncComm)
	c.mu.Lock()
	aborted := c.aborted
	c.mu.Unlock()
	if aborted {
		return nil, errorf(ncclInvalidUsage, "comm %p was aborted", comm)
	}
	return c, nil
}

// handleOf makes the ncclComm_t of c.
func handleOf(c *ncComm) unsafe.Pointer {
	h := C.malloc(1)
	comms.Store(uintptr(h), c)
	return h
}

// deviceOf is the device MSCCL_DEVICE names: "cuda" unless it says "cpu".
func deviceOf() (string, error) {
	switch d := os.Getenv("MSCCL_DEVICE"); d {
	case "", "cuda":
		return "cuda", nil
	case "cpu":
		return "cpu", nil
	default:
		return "", errorf(ncclInvalidArgument, "MSCCL_DEVICE=%q: want cpu or cuda", d)
	}
}

// idString reads our rendezvous id out of an ncclUniqueId: text,
// NUL-terminated, in the 128 bytes.
func idString(id *[128]byte) (string, error) {
	n := 0
	for n < len(id) && id[n] != 0 {
		n++
	}
	if n == 0 || n == len(id) {
		return "", errorf(ncclInvalidArgument, "the ncclUniqueId is not one ncclGetUniqueId of this library made")
	}
	return string(id[:n]), nil
}

// initRank joins the rendezvous id as rank of nranks; ordinal picks the
// GPU ("" for MSCCL_CUDA_DEVICE or the local rank's).
func initRank(id string, nranks, rank int, ordinal string) (*ncComm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, errorf(ncclInvalidArgument, "rank %d of %d ranks: want 0 <= rank < nranks", rank, nranks)
	}
	dev, err := deviceOf()
	if err != nil {
		return nil, err
	}
	rc, err := msccl.JoinComm(context.Background(), id, rank, nranks, msccl.CommOptions{Device: dev, CUDADevice: ordinal})
	if err != nil {
		return nil, err
	}
	c := &ncComm{rc: rc, device: dev, cuda: -1, ops: map[int]preMulSum{}, nextOp: 5, plans: map[planKey]string{}}
	if dev == "cuda" {
		if n, err := strconv.Atoi(ordinal); err == nil {
			c.cuda = n
		} else if n, err := strconv.Atoi(os.Getenv("MSCCL_CUDA_DEVICE")); err == nil {
			c.cuda = n
		}
	}
	return c, nil
}

// destroy closes c's communicator and forgets its handle.
func destroy(h unsafe.Pointer, c *ncComm) error {
	comms.Delete(uintptr(h))
	C.free(h)
	shadowErr := c.closeShadow("ncclCommDestroy")
	if c.family != nil {
		return errors.Join(shadowErr, c.family.close(c))
	}
	return errors.Join(shadowErr, c.rc.Close())
}

// family is several ranks of one job in this process, which one thread
// destroys one after another (nccl-tests does): closing a rank waits for
// the job's other ranks where it runs the rendezvous, so each member's
// close runs in the background and the last member's destroy waits for
// them all.
type family struct {
	mu   sync.Mutex
	open int
	wg   sync.WaitGroup
	errs []error
}

func newFamily(cs []*ncComm) {
	f := &family{open: len(cs)}
	for _, c := range cs {
		c.family = f
	}
}

func (f *family) close(c *ncComm) error {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := c.rc.Close()
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
	}()
	f.mu.Lock()
	f.open--
	last := f.open == 0
	f.mu.Unlock()
	if !last {
		return nil
	}
	f.wg.Wait()
	return errors.Join(f.errs...)
}

// abort leaves the job without waiting for the peers: the communicator
// is closed on another goroutine, and the call returns after a second
// at most whether or not the close has finished (a peer blocked in a
// collective is released by the closed connections and reports this
// rank as failed).
func abort(h unsafe.Pointer, c *ncComm) {
	c.mu.Lock()
	c.aborted = true
	c.mu.Unlock()
	comms.Delete(uintptr(h))
	done := make(chan struct{})
	go func() {
		c.closeShadow("ncclCommAbort")
		c.rc.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	C.free(h)
}

// tagSplit is the application tag of ncclCommSplit's messages on the
// parent's bootstrap.
const tagSplit = 0x4e43_0001

// split makes the communicator of c's ranks with color, ordered by
// (key, parent rank), as ncclCommSplit defines it; NCCL_SPLIT_NOCOLOR
// (-1) takes part and gets none. Every rank of c calls it.
func split(c *ncComm, color, key int) (*ncComm, error) {
	ctx := context.Background()
	n, me := c.rc.Size(), c.rc.Rank()
	mine := make([]byte, 8)
	binary.LittleEndian.PutUint32(mine, uint32(int32(color)))
	binary.LittleEndian.PutUint32(mine[4:], uint32(int32(key)))
	type member struct{ color, key, rank int }
	all := make([]member, n)
	all[me] = member{color, key, me}
	for q := 0; q < n; q++ {
		if q != me {
			if err := c.rc.Send(ctx, q, tagSplit, mine); err != nil {
				return nil, err
			}
		}
	}
	for q := 0; q < n; q++ {
		if q == me {
			continue
		}
		b, err := c.rc.Recv(ctx, q, tagSplit)
		if err != nil {
			return nil, err
		}
		if len(b) != 8 {
			return nil, errorf(ncclInternalError, "ncclCommSplit: rank %d sent %d bytes", q, len(b))
		}
		all[q] = member{int(int32(binary.LittleEndian.Uint32(b))), int(int32(binary.LittleEndian.Uint32(b[4:]))), q}
	}
	var group []member
	for _, m := range all {
		if m.color == color {
			group = append(group, m)
		}
	}
	sort.Slice(group, func(i, j int) bool {
		if group[i].key != group[j].key {
			return group[i].key < group[j].key
		}
		return group[i].rank < group[j].rank
	})
	// The group's new rank 0 makes the rendezvous and sends it to the
	// others on the parent's bootstrap.
	if color == -1 {
		return nil, nil
	}
	newRank := 0
	for i, m := range group {
		if m.rank == me {
			newRank = i
		}
	}
	var id string
	if newRank == 0 {
		var err error
		if id, err = msccl.NewUniqueID(); err != nil {
			return nil, err
		}
		for _, m := range group[1:] {
			if err := c.rc.Send(ctx, m.rank, tagSplit+1, []byte(id)); err != nil {
				return nil, err
			}
		}
	} else {
		b, err := c.rc.Recv(ctx, group[0].rank, tagSplit+1)
		if err != nil {
			return nil, err
		}
		id = string(b)
	}
	ordinal := ""
	if c.cuda >= 0 {
		ordinal = fmt.Sprint(c.cuda)
	}
	return initRank(id, len(group), newRank, ordinal)
}
