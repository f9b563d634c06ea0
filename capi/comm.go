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
	order  []execKey  // opening order, closed in reverse
	cuda   *cudaState // the cuda device's plans (cudarun.go); nil on cpu
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
	device, ordinal, err := parseDevice(device)
	if err != nil {
		return 0, err
	}
	opt := cudaOptions(msccl.CommOptions{Device: device}, ordinal)
	var c *msccl.RankComm
	if id == "" {
		c, err = msccl.OpenComm(context.Background(), opt)
	} else {
		c, err = msccl.JoinComm(context.Background(), id, int(rank), int(world), opt)
	}
	if err != nil {
		return 0, err
	}
	e := &commEntry{c: c, device: device, execs: map[execKey]*execEntry{}}
	if device == "cuda" {
		dev, err := newCUDADevice(c)
		if err != nil {
			c.Close()
			return 0, err
		}
		e.cuda = &cudaState{dev: dev, execs: map[execKey]*cudaEntry{}}
	}
	return table.add(e), nil
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

// commRun runs plan h on communicator ch: the caller's input (inBytes
// at in) is staged into the rank's registered input, the collective runs
// and the registered output is staged out to out; sizes outside the
// plan's rule are padded (resolve). The cpu device copies host memory
// and runs on the calling thread (stream must be 0); the cuda device
// takes device pointers and queues everything on stream (cudarun.go).
func commRun(ch, h int64, in unsafe.Pointer, inBytes int64, out unsafe.Pointer, outBytes int64, dtype, op string, stream uint64) error {
	// The stream first: a cpu caller passing one has mistaken the device,
	// which explains any other complaint.
	if c, err := table.comm(ch); err == nil && c.cuda == nil && stream != 0 {
		return invalid("stream: the %s device runs collectives on the calling thread; pass 0", c.device)
	}
	c, cl, err := lookupCall(ch, h, inBytes, outBytes, dtype, op)
	if err != nil {
		return err
	}
	if (in == nil && inBytes > 0) || (out == nil && outBytes > 0) {
		return invalid("input (%d bytes) or output (%d bytes) is NULL", inBytes, outBytes)
	}
	if c.cuda != nil {
		return c.runCUDA(cl, uint64(uintptr(in)), uint64(uintptr(out)), uintptr(stream))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	x, err := c.open(cl)
	if err != nil {
		return err
	}
	sin, sout := x.bufs.Input(), x.bufs.Output()
	src, dst := unsafe.Slice((*byte)(in), inBytes), unsafe.Slice((*byte)(out), outBytes)
	for _, s := range cl.stageIn(int64(len(sin))) {
		copy(sin[s.dst:s.dst+s.n], src[s.src:s.src+s.n])
	}
	if err := x.ex.Run(context.Background(), x.bufs, cl.dt, cl.red); err != nil {
		return err
	}
	for _, s := range cl.stageOut(int64(len(sout))) {
		copy(dst[s.dst:s.dst+s.n], sout[s.src:s.src+s.n])
	}
	return nil
}

// commPrepare opens plan h on communicator ch at the size a call with
// these arguments runs at and readies (dtype, op) on it, without running:
// what CUDA graph capture forbids (allocation, op tables, loading the
// kernel) happens here. Collective, as the first run of a size is.
func commPrepare(ch, h int64, inBytes, outBytes int64, dtype, op string) error {
	c, cl, err := lookupCall(ch, h, inBytes, outBytes, dtype, op)
	if err != nil {
		return err
	}
	if c.cuda != nil {
		return c.prepareCUDA(cl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err = c.open(cl)
	return err
}

func lookupCall(ch, h int64, inBytes, outBytes int64, dtype, op string) (*commEntry, *call, error) {
	c, err := table.comm(ch)
	if err != nil {
		return nil, nil, err
	}
	pe, err := table.plan(h)
	if err != nil {
		return nil, nil, err
	}
	cl, err := resolve(c.c.Size(), pe, inBytes, outBytes, dtype, op)
	if err != nil {
		return nil, nil, err
	}
	return c, cl, nil
}

// open returns the cpu device's executor and buffers of cl's plan at its
// size, opening them on first use (collective). c.mu is held.
func (c *commEntry) open(cl *call) (*execEntry, error) {
	if x := c.execs[cl.key]; x != nil {
		return x, nil
	}
	ctx := context.Background()
	ex, err := c.c.Open(ctx, cl.p, msccl.Options{})
	if err != nil {
		return nil, err
	}
	bufs, err := ex.Alloc(ctx, cl.key.size)
	if err != nil {
		ex.Close()
		return nil, err
	}
	x := &execEntry{ex: ex, bufs: bufs}
	c.execs[cl.key] = x
	c.order = append(c.order, cl.key)
	return x, nil
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
	if c.cuda != nil {
		errs = append(errs, c.cuda.close()...)
	}
	if err := c.c.Close(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("closing the communicator: %s", strings.Join(errs, "; "))
	}
	return nil
}

func newUniqueID() (string, error) { return msccl.NewUniqueID() }
