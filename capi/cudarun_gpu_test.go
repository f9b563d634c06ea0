package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// TestCUDACommGPU runs the cuda branch of msccl_comm_run on a GPU: four
// communicators of one job as goroutines of this process (VMM memory;
// a peer of the same process uses the owner's allocation itself, see
// cudadev's aliases; the torchrun run of scripts/gpu/torchrun.sh has one
// process per rank and imports), every collective at
// awkward sizes on device memory and a stream of the caller's, checked
// against the collective's definition; then captures on that stream:
// a prepared all_reduce is taken and its graph replayed twice with the
// right sums, an unprepared size refused by name without invalidating
// the capture. The ranks capture at once (thread-local mode, as
// torch.cuda.graph's capture_error_mode="thread_local"; in global mode
// the test's own synchronous copies on the other threads would be
// refused), and a rank that closes its communicator meanwhile must not
// spoil the others' captures: run6's ranks did, by cuCtxSynchronize.
// Skips without a driver or VMM.
func TestCUDACommGPU(t *testing.T) {
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device (%d, %v)", n, err)
	}
	if ok, why, err := cuda.VMMSupported(0); err != nil || !ok {
		t.Skipf("no VMM handles: %s %v", why, err)
	}
	t.Setenv("MSCCL_CUDA_IPC", "vmm")
	const world = 4
	plans := map[string]int64{}
	for _, a := range []string{"allreduce_ring", "allgather_ring", "reducescatter_ring", "alltoall_direct"} {
		plans[a] = compileFile(t, a)
	}
	uid, err := newUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = gpuRank(uid, r, world, plans)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func gpuRank(uid string, r, world int, plans map[string]int64) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ch, err := openComm("cuda:0", uid, int64(r), int64(world))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, table.release(ch)) }()
	s, err := cuda.NewStream(true)
	if err != nil {
		return err
	}
	defer s.Destroy()
	val := func(q, i int64) uint32 { return uint32((q+1)*1000 + i%97) }
	w := int64(world)
	sum := func(i int64) uint32 { // of every rank's element i
		var s uint32
		for q := int64(0); q < w; q++ {
			s += val(q, i)
		}
		return s
	}
	// The test's device buffers, allocated once for the largest call: in
	// one process a driver call that frees (or may allocate) device memory
	// waits for the GPU to drain, and between collectives a peer's kernel
	// may still spin on this rank (executor/cuda's rankload.go).
	sizes := []int64{1, 1000, 1003}
	most := 4 * w * sizes[len(sizes)-1]
	din, err := cuda.Malloc(most)
	if err != nil {
		return err
	}
	defer cuda.Free(din)
	dout, err := cuda.Malloc(most)
	if err != nil {
		return err
	}
	defer cuda.Free(dout)
	var wrong []error
	for _, n := range sizes {
		for _, tc := range []struct {
			algo      string
			inN, outN int64
			in        func(i int64) uint32
			want      func(i int64) uint32
		}{
			{"allreduce_ring", n, n, func(i int64) uint32 { return val(int64(r), i) },
				sum},
			{"allgather_ring", n, n * w, func(i int64) uint32 { return val(int64(r), i) },
				func(i int64) uint32 { return val(i/n, i%n) }},
			{"reducescatter_ring", n * w, n, func(i int64) uint32 { return val(int64(r), i) },
				func(i int64) uint32 { return sum(int64(r)*n + i) }},
			{"alltoall_direct", n * w, n * w, func(i int64) uint32 { return uint32(r)*100000 + uint32(i) },
				func(i int64) uint32 { return uint32(i/n)*100000 + uint32(int64(r)*n+i%n) }},
		} {
			// A wrong result is this rank's finding only: it goes on
			// with the others' collective calls (returning here would
			// leave them in a call this rank never makes: run6's "rank 3
			// broke the protocol" after ranks 0-2 found wrong sums).
			if err := gpuCall(ch, plans[tc.algo], s, din, dout, tc.inN, tc.outN, tc.in, tc.want); err != nil {
				var w wrongResult
				if !errors.As(err, &w) {
					return errors.Join(append(wrong, fmt.Errorf("%s n=%d: %w", tc.algo, n, err))...)
				}
				wrong = append(wrong, fmt.Errorf("%s n=%d: %w", tc.algo, n, err))
			}
		}
	}
	if len(wrong) > 0 {
		return errors.Join(wrong...)
	}
	// A capture of a prepared all_reduce on the caller's stream.
	// din holds the 1000 elements; the refused call below queues nothing,
	// so its larger size needs no buffer of that size.
	buf := din
	if err := s.BeginCapture(); err != nil {
		return err
	}
	rerr := gpuRun(ch, plans["allreduce_ring"], buf, buf, 4*1000, 4*1000, s)
	g, err := s.EndCapture()
	if err != nil {
		return fmt.Errorf("the capture was invalidated: %w (run: %v)", err, rerr)
	}
	defer g.Destroy()
	if rerr != nil {
		return fmt.Errorf("capture: %w", rerr)
	}
	// What a user relies on: the graph replays the collective, each
	// replay on the input it finds (every rank replays, as every rank
	// runs every collective).
	if err := replayCheck(g, s, buf, 1000, func(i int64) uint32 { return val(int64(r), i) }, sum); err != nil {
		return err
	}
	// A capture of a size never prepared is refused before anything
	// is queued (the capture stays valid).
	if err := s.BeginCapture(); err != nil {
		return err
	}
	rerr = gpuRun(ch, plans["allreduce_ring"], buf, buf, 4*50000, 4*50000, s)
	g2, err := s.EndCapture()
	if err != nil {
		return fmt.Errorf("the refused capture was invalidated: %w", err)
	}
	g2.Destroy()
	if rerr == nil || !strings.Contains(rerr.Error(), "not prepared") {
		return fmt.Errorf("unprepared under capture: %v", rerr)
	}
	return nil
}

// replayCheck launches g, a capture of an in-place all_reduce of n
// int32 at buf, twice on s, each time on the input in(i) written before,
// and checks that buf holds want(i) after each.
func replayCheck(g *cuda.Graph, s *cuda.Stream, buf cuda.DevicePtr, n int64, in, want func(int64) uint32) error {
	ge, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer ge.Destroy()
	host := make([]byte, 4*n)
	for k := 0; k < 2; k++ {
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(host[4*i:], in(i))
		}
		if err := cuda.MemcpyHtoD(buf, host); err != nil {
			return err
		}
		if err := ge.Launch(s); err != nil {
			return fmt.Errorf("replay %d: %w", k, err)
		}
		if err := s.Synchronize(); err != nil {
			return fmt.Errorf("replay %d: %w", k, err)
		}
		if err := cuda.MemcpyDtoH(host, buf); err != nil {
			return err
		}
		for i := int64(0); i < n; i++ {
			if got := binary.LittleEndian.Uint32(host[4*i:]); got != want(i) {
				return fmt.Errorf("replay %d of the captured all_reduce: element %d of %d is %d, want %d", k, i, n, got, want(i))
			}
		}
	}
	return nil
}

// gpuRun runs plan h's collective of i32 sums on communicator ch on
// device memory, queued on s, as msccl_comm_run does.
func gpuRun(ch, h int64, din, dout cuda.DevicePtr, inB, outB int64, s *cuda.Stream) error {
	// What C passes: device addresses as void * (reinterpreted, not
	// converted: they are no Go memory).
	in, out := *(*unsafe.Pointer)(unsafe.Pointer(&din)), *(*unsafe.Pointer)(unsafe.Pointer(&dout))
	return commCall(callArgs{comm: ch, plan: h, in: in, out: out,
		inBytes: inB, outBytes: outB, dtype: "i32", op: "sum", stream: uint64(s.Handle())})
}

// gpuCall runs one collective through gpuRun on device memory (din and
// dout, large enough) and checks every element of the output.
func gpuCall(ch, h int64, s *cuda.Stream, din, dout cuda.DevicePtr, inN, outN int64, in, want func(int64) uint32) error {
	host := make([]byte, 4*max(inN, outN))
	for i := int64(0); i < inN; i++ {
		binary.LittleEndian.PutUint32(host[4*i:], in(i))
	}
	if err := cuda.MemcpyHtoD(din, host[:4*inN]); err != nil {
		return err
	}
	if err := gpuRun(ch, h, din, dout, 4*inN, 4*outN, s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := cuda.MemcpyDtoH(host[:4*outN], dout); err != nil {
		return err
	}
	var bad []int64
	for i := int64(0); i < outN; i++ {
		if got := binary.LittleEndian.Uint32(host[4*i:]); got != want(i) {
			bad = append(bad, i)
		}
	}
	if len(bad) > 0 {
		i := bad[0]
		return wrongResult{fmt.Sprintf("element %d of %d is %d, want %d; %d of %d elements wrong, the last at %d",
			i, outN, binary.LittleEndian.Uint32(host[4*i:]), want(i), len(bad), outN, bad[len(bad)-1])}
	}
	return nil
}

// wrongResult is a collective that ran but computed other values than
// its definition's: the rank's finding, not a failure of the job.
type wrongResult struct{ msg string }

func (w wrongResult) Error() string { return w.msg }
