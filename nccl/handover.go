package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"unsafe"

	"github.com/msccl-go/msccl-go"
)

// A call msccl-go does not run (a type or reduction it lacks, or a
// collective with no proven plan for its size and ranks) is handed to
// the real NCCL of MSCCL_NCCL_LIB, per call, on a communicator of the
// real NCCL's own that shadows ours: made on the first such call of our
// communicator (every rank makes it then, see handOverReason), destroyed,
// aborted and finalized with ours. A split communicator is a new one of
// ours and gets its own shadow the same way. No communicator of ours
// ever reaches the real NCCL, and none of its reaches us.

// tagReal is the application tag on which rank 0 of a communicator sends
// the real NCCL's ncclUniqueId to the others (our bootstrap carries it).
const tagReal = 0x4e43_0010

// handOverReason says why msccl-go does not run k, or "" when it does.
// It is a pure function of what NCCL requires every rank to pass alike:
// the collective, type, reduction and count, and the communicator's
// size and device (the id of a PreMulSum operator counts only as "a
// PreMulSum", and ranks create those in the same order). So every rank
// reaches the same decision for the same call, and all of them enter the
// real NCCL together, the first time to create its communicator.
func (k *call) handOverReason() string {
	if k.p2p != 0 || (k.sendN == 0 && k.recvN == 0) {
		return "" // sends, receives and empty calls move bytes
	}
	n := k.c.rc.Size()
	dt := dataTypes[k.dtype]
	if k.reducing && !(n == 1 && k.op < numOps) {
		switch {
		case !dt.native:
			return fmt.Sprintf("%s of %s (msccl-go has no such type to reduce)", k.name, dt.name)
		case k.op == opProd && dt.dt != msccl.I32 && dt.dt != msccl.U32 && dt.dt != msccl.U8:
			return fmt.Sprintf("%s with ncclProd on %s (msccl-go multiplies integer types only)", k.name, dt.name)
		case k.op >= opAvg && (k.c.device != "cpu" || dt.dt != msccl.F32):
			what := "ncclAvg"
			if k.op >= numOps {
				what = "a PreMulSum operator"
			}
			return fmt.Sprintf("%s with %s on %s on the %s device (msccl-go scales f32 on the cpu device only)", k.name, what, dt.name, k.c.device)
		}
	}
	if n == 1 || k.coll.Rooted() {
		return "" // a copy; rooted collectives compile their plan for any ranks and root
	}
	return k.c.planReason(k.coll, k.coll.MessageSize(k.sendN, k.recvN), k.name)
}

// planReason says why no proven plan of the selection table runs coll
// at size bytes on c's ranks, or "". The selection depends on those
// alone; the answer is kept per (collective, size).
func (c *ncComm) planReason(coll msccl.Collective, size int64, name string) string {
	key := planKey{coll, size}
	c.mu.Lock()
	r, ok := c.plans[key]
	c.mu.Unlock()
	if ok {
		return r
	}
	if _, err := msccl.SelectPlanStaged("", string(coll), c.rc.Size(), size); err != nil {
		r = fmt.Sprintf("%s of %d bytes on %d ranks has no proven plan (%v)", name, size, c.rc.Size(), err)
	}
	c.mu.Lock()
	c.plans[key] = r
	c.mu.Unlock()
	return r
}

type planKey struct {
	coll msccl.Collective
	size int64
}

// mayHandOver says whether calls may go to the real NCCL, and if not,
// the ncclInvalidUsage error naming reason and what stops it.
func mayHandOver(c *ncComm, reason string) error {
	infoOnce("not run by msccl-go: " + reason)
	if os.Getenv("MSCCL_NCCL_FALLBACK") == "0" {
		return errorf(ncclInvalidUsage, "%s; MSCCL_NCCL_FALLBACK=0 forbids handing it to NCCL", reason)
	}
	if err := openReal(); err != nil {
		return errorf(ncclInvalidUsage, "%s; it would go to the real NCCL, but %v", reason, err)
	}
	if c.device != "cuda" {
		return errorf(ncclInvalidUsage, "%s; on the %s device (MSCCL_DEVICE=%s, host pointers) there is no hand-over: the real NCCL runs on GPUs", reason, c.device, c.device)
	}
	return nil
}

// handOver runs k, which msccl-go does not run, on the real NCCL.
func handOver(k *call, reason string) error {
	if err := mayHandOver(k.c, reason); err != nil {
		return err
	}
	if err := shadow([]*ncComm{k.c}); err != nil {
		return err
	}
	return forward(k)
}

// handOverGroup runs the calls of one group that msccl-go does not run
// on the real NCCL, as one group of its own: the shadows the calls'
// communicators lack are made inside one real ncclGroupStart/End (so
// that one thread may make several ranks' shadows, as NCCL requires of
// ranks driven from one thread), then the calls are issued inside
// another. The group's calls msccl-go runs have run before (runGroup);
// every rank orders them so, since every rank splits the group alike.
func handOverGroup(calls []*call) error {
	var cs []*ncComm
	seen := map[*ncComm]bool{}
	for _, k := range calls {
		if err := mayHandOver(k.c, k.reason); err != nil {
			return err
		}
		if !seen[k.c] {
			seen[k.c] = true
			cs = append(cs, k.c)
		}
	}
	if err := shadow(cs); err != nil {
		return err
	}
	if err := realGroupStart(); err != nil {
		return err
	}
	var errs []error
	for _, k := range calls {
		if err := forward(k); err != nil {
			record(k.c, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, realGroupEnd())...)
}

// shadow makes the real NCCL's communicator of each of cs that lacks
// one. Rank 0 of each asks the real NCCL for an ncclUniqueId and sends
// it to the others over our bootstrap (a send only queues, so a rank 0
// in this process never waits on a rank of cs after it: cs is ordered by
// rank); the real inits run in one real group. A failed shadow stays
// failed: the peers do not come back to make it again.
func shadow(cs []*ncComm) error {
	var need []*ncComm
	for _, c := range cs {
		c.mu.Lock()
		switch {
		case c.realErr != nil:
			err := c.realErr
			c.mu.Unlock()
			return err
		case c.real == nil:
			need = append(need, c)
		}
		c.mu.Unlock()
	}
	if len(need) == 0 {
		return nil
	}
	sort.SliceStable(need, func(i, j int) bool { return need[i].rc.Rank() < need[j].rc.Rank() })
	ctx := context.Background()
	ids := make([][128]byte, len(need))
	for i, c := range need {
		var err error
		if ids[i], err = shareID(ctx, c); err != nil {
			return c.failShadow(err)
		}
	}
	if err := realGroupStart(); err != nil {
		return err
	}
	made, free := cPointers(len(need))
	defer free()
	errs := make([]error, len(need))
	for i, c := range need {
		errs[i] = realInit(&made[i], ids[i], c.rc.Size(), c.rc.Rank())
	}
	if err := realGroupEnd(); err != nil {
		for i := range errs {
			errs[i] = errors.Join(errs[i], err)
		}
	}
	var all []error
	for i, c := range need {
		if errs[i] != nil {
			all = append(all, c.failShadow(errs[i]))
			continue
		}
		c.mu.Lock()
		c.real = made[i]
		c.mu.Unlock()
		infoOnce(fmt.Sprintf("rank %d of %d: made the real NCCL's communicator (MSCCL_NCCL_LIB=%s) for the calls msccl-go does not run", c.rc.Rank(), c.rc.Size(), realLib.path))
	}
	return errors.Join(all...)
}

// shareID is the real ncclUniqueId of c's shadow: rank 0 makes it and
// sends it to the others.
func shareID(ctx context.Context, c *ncComm) ([128]byte, error) {
	var id [128]byte
	if c.rc.Rank() == 0 {
		var err error
		if id, err = realUniqueID(); err != nil {
			return id, err
		}
		for q := 1; q < c.rc.Size(); q++ {
			if err := c.rc.Send(ctx, q, tagReal, id[:]); err != nil {
				return id, err
			}
		}
		return id, nil
	}
	b, err := c.rc.Recv(ctx, 0, tagReal)
	if err != nil {
		return id, err
	}
	if len(b) != len(id) {
		return id, errorf(ncclInternalError, "rank 0 sent a real ncclUniqueId of %d bytes, want %d", len(b), len(id))
	}
	copy(id[:], b)
	return id, nil
}

func (c *ncComm) failShadow(err error) error {
	err = fmt.Errorf("making the real NCCL's communicator for the calls msccl-go does not run: %w", err)
	if codeOf(err) == ncclSystemError {
		err = errorf(ncclInvalidUsage, "%v", err)
	}
	c.mu.Lock()
	c.realErr = err
	c.mu.Unlock()
	return err
}

// forward issues k on its communicator's shadow; a PreMulSum operator
// of ours becomes one of the real NCCL's, made on first use.
func forward(k *call) error {
	c := k.c
	c.mu.Lock()
	comm := c.real
	c.mu.Unlock()
	op := k.op
	if k.reducing && k.op >= numOps {
		var err error
		if op, err = c.realOp(k.op, comm); err != nil {
			return err
		}
	}
	return realForward(k, comm, op)
}

// realOp is the real NCCL's operator for our PreMulSum operator op.
func (c *ncComm) realOp(op int, comm unsafe.Pointer) (int, error) {
	c.mu.Lock()
	pm, ok := c.ops[op]
	c.mu.Unlock()
	if !ok {
		return 0, errorf(ncclInvalidArgument, "op %d is not an ncclRedOp_t of this communicator", op)
	}
	if pm.hasReal {
		return pm.real, nil
	}
	r, err := realPreMulSum(&pm, comm)
	if err != nil {
		return 0, err
	}
	pm.real, pm.hasReal = r, true
	c.mu.Lock()
	c.ops[op] = pm
	c.mu.Unlock()
	return r, nil
}

// closeShadow ends c's shadow, if it has one, with the real NCCL's
// call name (ncclCommDestroy or ncclCommAbort).
func (c *ncComm) closeShadow(name string) error {
	c.mu.Lock()
	comm := c.real
	c.real = nil
	c.mu.Unlock()
	if comm == nil {
		return nil
	}
	return realCommCall(name, comm)
}

// finalizeShadow is ncclCommFinalize of c's shadow, if it has one.
func (c *ncComm) finalizeShadow() error {
	c.mu.Lock()
	comm := c.real
	c.mu.Unlock()
	if comm == nil {
		return nil
	}
	return realCommCall("ncclCommFinalize", comm)
}

// dropRealOp destroys the real operator made for our PreMulSum pm.
func (c *ncComm) dropRealOp(pm preMulSum) error {
	c.mu.Lock()
	comm := c.real
	c.mu.Unlock()
	if !pm.hasReal || comm == nil {
		return nil
	}
	return realRedOpDestroy(pm.real, comm)
}
