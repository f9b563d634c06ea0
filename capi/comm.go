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
// cpu.Options.Size) count it: output bytes for allgather, input bytes
// otherwise.
func messageSize(p *ir.Plan, in, out int64) int64 {
	if p.Collective == ir.AllGather {
		return out
	}
	return in
}

// commRun runs plan h on communicator ch: copies in (inBytes at in) into
// the rank's registered input, runs the collective, and copies the output
// to out. The CPU device runs on the calling thread; stream must be 0.
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
		return err
	}
	if wantIn != inBytes || wantOut != outBytes {
		return invalid("plan %q (%s) at %d bytes takes %d input and %d output bytes; got %d and %d", p.Name, p.Collective, size, wantIn, wantOut, inBytes, outBytes)
	}
	if int64(dt.Size()) > 0 && size%int64(dt.Size()) != 0 {
		return invalid("%d bytes is not a whole number of %s elements", size, dt)
	}
	k, err := pe.key()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx := context.Background()
	key := execKey{k, size}
	x := c.execs[key]
	if x == nil {
		ex, err := c.c.Open(ctx, p, msccl.Options{})
		if err != nil {
			return err
		}
		bufs, err := ex.Alloc(ctx, size)
		if err != nil {
			ex.Close()
			return err
		}
		x = &execEntry{ex: ex, bufs: bufs}
		c.execs[key] = x
		c.order = append(c.order, key)
	}
	copy(x.bufs.Input(), unsafe.Slice((*byte)(in), inBytes))
	if err := x.ex.Run(ctx, x.bufs, dt, red); err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(out), outBytes), x.bufs.Output())
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
