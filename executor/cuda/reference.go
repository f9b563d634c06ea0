package cudaexec

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/msccl-go/msccl-go/executor/cuda/reference"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Reference runs a hand-written kernel of executor/cuda/reference on this
// executor's streams, grid (each rank's block count and the plan's
// threads per block) and buffers, forked and joined exactly as Run does,
// so that the two can be timed against each other in one process.
type Reference struct {
	e       *Executor
	k       reference.Kernel
	threads uint32
	nblocks int
	fns     map[fnKey]*fnEntry
	binds   map[bindKey]*refBinding
	state   cuda.DevicePtr  // per rank: reference.CounterBytes of counters
	watch   []*cuda.HostMem // per rank: one WatchRecord per block
	broken  error
}

type refBinding struct {
	fn   *fnEntry
	mem  []cuda.DevicePtr // per rank: scratch, then Args
	args []cuda.DevicePtr
	sg   *Graph // launched as the plan's fan-out is (runstream.go)
}

// Reference prepares the named reference kernel (reference.Kernels) for
// this executor's plan: the collective must match, and every rank must
// run the same number of blocks.
func (e *Executor) Reference(name string) (*Reference, error) {
	if e.spread() {
		return nil, spreadRefusal("a Reference kernel", e.devs.of)
	}
	k, err := reference.Lookup(name)
	if err != nil {
		return nil, err
	}
	if k.Collective != e.p.Collective {
		return nil, fmt.Errorf("reference %s is an %s, plan %s an %s", k.Name, k.Collective, e.p.Name, e.p.Collective)
	}
	n := len(e.ranks)
	if n < 2 || n > reference.MaxRanks {
		return nil, fmt.Errorf("reference %s: %d ranks (want 2..%d)", k.Name, n, reference.MaxRanks)
	}
	for r, rs := range e.ranks {
		if rs.nblocks != e.ranks[0].nblocks {
			return nil, fmt.Errorf("reference %s needs one grid for all ranks: rank %d runs %d blocks, rank 0 %d", k.Name, r, rs.nblocks, e.ranks[0].nblocks)
		}
	}
	ref := &Reference{e: e, k: k, threads: uint32(e.p.NumThreadsPerBlock), nblocks: e.ranks[0].nblocks,
		fns: map[fnKey]*fnEntry{}, binds: map[bindKey]*refBinding{}}
	size := int64(reference.CounterBytes * n)
	if ref.state, err = cuda.Malloc(size); err != nil {
		return nil, err
	}
	if err := cuda.Memset8(ref.state, 0, size); err != nil {
		ref.Close()
		return nil, err
	}
	for range e.ranks {
		w, err := cuda.HostAllocMapped(int64(kernels.WatchBytes * ref.nblocks))
		if err != nil {
			ref.Close()
			return nil, err
		}
		clear(w.Bytes)
		ref.watch = append(ref.watch, w)
	}
	return ref, nil
}

// Name is the reference kernel's name.
func (ref *Reference) Name() string { return ref.k.Name }

func (ref *Reference) function(dt ir.DType, ll int) (*fnEntry, error) {
	key := fnKey{dt, ll}
	if ref.k.Collective == ir.AllGather {
		key = fnKey{} // one entry for every type and width
	}
	if f := ref.fns[key]; f != nil {
		return f, nil
	}
	src, entry, err := ref.k.Source(dt, ll)
	if err != nil {
		return nil, err
	}
	f, err := ref.e.compile(entry, src)
	if err != nil {
		return nil, err
	}
	ref.fns[key] = f
	return f, nil
}

func (ref *Reference) bind(c *Call) (*refBinding, error) {
	e := ref.e
	bf := c.Buffers
	if bf == nil || len(bf.In) != len(e.ranks) || len(bf.Out) != len(e.ranks) {
		return nil, errors.New("cudaexec: call without buffers for every rank")
	}
	if bf.stage != nil {
		return nil, fmt.Errorf("reference %s: message size %d is staged for the plan; the reference runs only sizes the plan's rule admits", ref.k.Name, bf.Size)
	}
	key := e.keyOf(c)
	if b := ref.binds[key]; b != nil {
		return b, nil
	}
	red, err := kernels.ReduceCode(c.Reduce)
	if err != nil {
		return nil, fmt.Errorf("reference %s: %w", ref.k.Name, err)
	}
	ll := llWidth(c)
	n := len(e.ranks)
	chunk, err := ref.k.Chunk(n, bf.InBytes, ll)
	if err != nil {
		return nil, err
	}
	fn, err := ref.function(c.DType, ll)
	if err != nil {
		return nil, err
	}
	scratchN := max(ref.k.ScratchBytes(n, chunk), 16)
	b := &refBinding{fn: fn, mem: make([]cuda.DevicePtr, 0, n), args: make([]cuda.DevicePtr, n)}
	free := func() {
		for _, p := range b.mem {
			cuda.Free(p)
		}
	}
	var a reference.Args
	for r := 0; r < n; r++ {
		p, err := cuda.Malloc(scratchN + int64(reference.ArgsBytes))
		if err != nil {
			free()
			return nil, err
		}
		b.mem = append(b.mem, p)
		if err := cuda.Memset8(p, 0, scratchN); err != nil {
			free()
			return nil, err
		}
		b.args[r] = p + cuda.DevicePtr(scratchN)
		a.In[r], a.Out[r], a.Scratch[r] = uint64(bf.In[r]), uint64(bf.Out[r]), uint64(p)
		a.Arrive[r] = uint64(ref.state) + uint64(reference.CounterBytes*r)
	}
	a.Chunk, a.ScratchHalf = uint64(chunk), uint64(scratchN/2)
	a.TimeoutNs, a.NRanks, a.Red = uint64(e.opt.Timeout.Nanoseconds()), uint32(n), uint32(red)
	for r := 0; r < n; r++ {
		a.Rank = uint32(r)
		st := uint64(ref.state) + uint64(reference.CounterBytes*r)
		a.Epoch, a.Done, a.Watch = st+16, st+24, uint64(ref.watch[r].Dev)
		if err := cuda.MemcpyHtoD(b.args[r], a.Encode()); err != nil {
			free()
			return nil, err
		}
	}
	ref.binds[key] = b
	return b, nil
}

// Prepare compiles and uploads what Run needs for c.
func (ref *Reference) Prepare(c Call) error {
	_, err := ref.bind(&c)
	return err
}

// Run enqueues the reference collective as Run enqueues the plan.
func (ref *Reference) Run(c Call) error {
	if ref.broken != nil {
		return fmt.Errorf("cudaexec: reference unusable after an earlier failure: %w", ref.broken)
	}
	b, err := ref.bind(&c)
	if err != nil {
		return err
	}
	return ref.e.onStream(c.Stream, &b.sg, func(r int, rs *rankRes) error {
		arg := uint64(b.args[r])
		if err := b.fn.fn.Launch([3]uint32{uint32(ref.nblocks), 1, 1}, [3]uint32{ref.threads, 1, 1}, 0, rs.stream, unsafe.Pointer(&arg)); err != nil {
			return fmt.Errorf("launching reference %s on rank %d: %w", ref.k.Name, r, err)
		}
		return nil
	})
}

// Capture records Run(c) into a graph on c.Stream, as Executor.Capture.
func (ref *Reference) Capture(c Call) (*Graph, error) {
	if c.Stream == nil {
		return nil, errors.New("cudaexec: Capture needs Call.Stream")
	}
	if _, err := ref.bind(&c); err != nil {
		return nil, err
	}
	return ref.e.capture(c.Stream, func() error { return ref.Run(c) })
}

// Wait blocks until the work enqueued so far is done and reports a
// reference block the watchdog stopped.
func (ref *Reference) Wait(s *cuda.Stream) error {
	if err := ref.e.Wait(s); err != nil {
		return err
	}
	var h HangError
	for _, w := range ref.watch {
		for i := 0; i < ref.nblocks; i++ {
			if rec, ok := kernels.DecodeWatch(w.Bytes[i*kernels.WatchBytes:]); ok {
				h.Stuck = append(h.Stuck, rec)
			}
		}
	}
	if len(h.Stuck) > 0 {
		ref.broken = &h
		return fmt.Errorf("reference %s: %w", ref.k.Name, &h)
	}
	return nil
}

// Release frees the scratch bound to bufs, after the work in flight.
func (ref *Reference) Release(bufs *Buffers) error {
	if err := ref.e.syncRanks(); err != nil {
		return err
	}
	pk := ptrKey(bufs)
	var first firstErr
	for k, b := range ref.binds {
		if k.ptrs != pk {
			continue
		}
		first.keep(b.sg.Destroy())
		for _, p := range b.mem {
			first.keep(cuda.Free(p))
		}
		delete(ref.binds, k)
	}
	return first.err
}

// Close frees everything the reference allocated; the executor stays open.
func (ref *Reference) Close() error {
	if ref == nil {
		return nil
	}
	var first firstErr
	keep := first.keep
	keep(ref.e.syncRanks())
	for _, b := range ref.binds {
		keep(b.sg.Destroy())
		for _, p := range b.mem {
			keep(cuda.Free(p))
		}
	}
	ref.binds = map[bindKey]*refBinding{}
	for _, f := range ref.fns {
		keep(f.mod.Unload())
	}
	ref.fns = map[fnKey]*fnEntry{}
	for _, w := range ref.watch {
		keep(w.Free())
	}
	ref.watch = nil
	if ref.state != 0 {
		keep(cuda.Free(ref.state))
		ref.state = 0
	}
	return first.err
}
