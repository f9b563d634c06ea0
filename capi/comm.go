package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
)

// commEntry is what a communicator handle stands for: this process's rank
// of a multi-process job, and the plans it has run, each opened once per
// message size (Open and Alloc are collective: every rank runs the same
// sequence of collectives, so every rank opens them in the same order).
// mu serialises the collectives of one communicator, as NCCL requires of
// its callers; different communicators run in parallel.
type commEntry struct {
	mu     sync.Mutex
	c      *msccl.RankComm
	device string
	execs  map[execKey]*execEntry
	order  []execKey // opening order, closed in reverse
}

// execKey names a plan by content, not by handle: the same plan compiled
// or loaded separately on every rank gets the same key everywhere.
type execKey struct {
	plan [32]byte
	size int64
}

type execEntry struct {
	ex   *msccl.RankExec
	bufs *msccl.RankBuffers
}

func openComm(device, id string, rank, world int64) (int64, error) {
	if device == "" {
		device = "cpu"
	}
	if device != "cpu" {
		// run copies the caller's host memory into the shared buffers;
		// the cuda device's buffers are device memory (msccl.OpenComm
		// with Device "cuda" from Go).
		return 0, fmt.Errorf("device %q: the C ABI's communicator runs on the cpu device only", device)
	}
	opt := msccl.CommOptions{Device: device}
	var c *msccl.RankComm
	var err error
	if id == "" {
		c, err = msccl.OpenComm(context.Background(), opt)
	} else {
		c, err = msccl.JoinComm(context.Background(), id, int(rank), int(world), opt)
	}
	if err != nil {
		return 0, err
	}
	return table.add(&commEntry{c: c, device: device, execs: map[execKey]*execEntry{}}), nil
}

func commInfo(h int64) ([]byte, error) {
	c, err := table.comm(h)
	if err != nil {
		return nil, err
	}
	return encodeJSON(map[string]any{"rank": c.c.Rank(), "size": c.c.Size(), "device": c.device}), nil
}

// key hashes the plan's JSON once per plan handle.
func (e *planEntry) key() ([32]byte, error) {
	e.keyOnce.Do(func() {
		data, err := ir.Encode(e.plan)
		e.keyVal, e.keyErr = sha256.Sum256(data), err
	})
	return e.keyVal, e.keyErr
}

// messageSize is the size a collective call means, as nccl-tests (and
// ir.Plan.BufferBytes) count it: output bytes for allgather and gather,
// input bytes otherwise.
func messageSize(p *ir.Plan, in, out int64) int64 {
	if p.Collective.Gathers() {
		return out
	}
	return in
}

// pieces is how many per-rank blocks a buffer of the collective holds, as
// executor/cuda's staging counts them: allgather's and gather's output,
// reducescatter's and scatter's input and both of alltoall's.
func pieces(p *ir.Plan) (in, out int64) {
	n := int64(len(p.GPUs))
	in, out = 1, 1
	if p.Collective.Scatters() || p.Collective == ir.AllToAll {
		in = n
	}
	if p.Collective.Gathers() || p.Collective == ir.AllToAll {
		out = n
	}
	return in, out
}

// copyPieces copies n pieces of size bytes from src (pieces srcStride
// apart) to dst (dstStride apart).
func copyPieces(dst, src []byte, n, size, dstStride, srcStride int64) {
	for i := int64(0); i < n; i++ {
		copy(dst[i*dstStride:i*dstStride+size], src[i*srcStride:i*srcStride+size])
	}
}

// commRun runs plan h on communicator ch: copies in (inBytes at in) into
// the rank's registered input, runs the collective, and copies the output
// to out; sizes outside the plan's rule are staged (below). The CPU device
// runs on the calling thread; stream must be 0.
func commRun(ch, h int64, in unsafe.Pointer, inBytes int64, out unsafe.Pointer, outBytes int64, dtype, op string, stream uint64) error {
	c, err := table.comm(ch)
	if err != nil {
		return err
	}
	pe, err := table.plan(h)
	if err != nil {
		return err
	}
	p := pe.plan
	if stream != 0 {
		return invalid("stream: the %s device runs collectives on the calling thread; pass 0", c.device)
	}
	if len(p.GPUs) != c.c.Size() {
		return invalid("plan %q is for %d ranks; this communicator has %d", p.Name, len(p.GPUs), c.c.Size())
	}
	dt, err := ir.ParseDType(dtype)
	if err != nil {
		return invalid("dtype: %v", err)
	}
	red := ir.ReduceOp(op)
	switch red {
	case "":
		red = ir.ReduceSum
	case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd:
	default:
		return invalid("op: unknown reduction %q (want sum, min, max or prod)", op)
	}
	if inBytes < 0 || outBytes < 0 || (in == nil && inBytes > 0) || (out == nil && outBytes > 0) {
		return invalid("input (%d bytes) or output (%d bytes) is NULL or negative", inBytes, outBytes)
	}
	size := messageSize(p, inBytes, outBytes)
	wantIn, wantOut, err := p.BufferBytes(size)
	if err != nil {
		return invalid("plan %q: %v", p.Name, err)
	}
	if wantIn != inBytes || wantOut != outBytes {
		return invalid("plan %q (%s) at %d bytes takes %d input and %d output bytes; got %d and %d", p.Name, p.Collective, size, wantIn, wantOut, inBytes, outBytes)
	}
	// A size outside the plan's rule (a tensor of 1001 floats) runs at
	// the next size the rule admits, each rank's pieces padded at their
	// ends, as executor/cuda stages it: collectives combine an element
	// only with the same element of other ranks' same piece, so the pads
	// never reach real elements.
	pin, pout := pieces(p)
	es := int64(dt.Size())
	if (inBytes/pin)%es != 0 || (outBytes/pout)%es != 0 {
		return invalid("%d bytes is not a whole number of %s elements per rank's piece (input %d bytes in %d pieces, output %d in %d)", size, dt, inBytes, pin, outBytes, pout)
	}
	rule, err := p.SizeRule()
	if err != nil {
		return err
	}
	run := size
	if !rule.Admits(size) {
		next, ok := rule.Next(size)
		if !ok {
			return invalid("plan %q does not serve %d bytes: its sizes are %s", p.Name, size, rule)
		}
		run = next
	}
	k, err := pe.key()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx := context.Background()
	key := execKey{k, run}
	x := c.execs[key]
	if x == nil {
		ex, err := c.c.Open(ctx, p, msccl.Options{})
		if err != nil {
			return err
		}
		bufs, err := ex.Alloc(ctx, run)
		if err != nil {
			ex.Close()
			return err
		}
		x = &execEntry{ex: ex, bufs: bufs}
		c.execs[key] = x
		c.order = append(c.order, key)
	}
	sin, sout := x.bufs.Input(), x.bufs.Output()
	copyPieces(sin, unsafe.Slice((*byte)(in), inBytes), pin, inBytes/pin, int64(len(sin))/pin, inBytes/pin)
	if err := x.ex.Run(ctx, x.bufs, dt, red); err != nil {
		return err
	}
	copyPieces(unsafe.Slice((*byte)(out), outBytes), sout, pout, outBytes/pout, outBytes/pout, int64(len(sout))/pout)
	return nil
}

// Close frees every plan's buffers and channels, newest first, then
// leaves the job.
func (c *commEntry) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []string
	for i := len(c.order) - 1; i >= 0; i-- {
		x := c.execs[c.order[i]]
		if err := x.bufs.Free(); err != nil {
			errs = append(errs, err.Error())
		}
		if err := x.ex.Close(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	c.execs, c.order = nil, nil
	if err := c.c.Close(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("closing the communicator: %s", strings.Join(errs, "; "))
	}
	return nil
}

func newUniqueID() (string, error) { return msccl.NewUniqueID() }
