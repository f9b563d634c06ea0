package cudaexec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/cudadev"
)

// OpenRank's ranks as goroutines of this process, each with its own
// communicator over the one GPU: a peer of the same process uses the
// owner's allocation at its own address (cudadev's local aliases; the
// multi-process tests of msccl-bench and the root package cover imports).
// Before the launches every rank checks that it sees each peer's sync
// region and buffers as the peer wrote them, and a failure lists how
// this process maps every rank's memory (own, alias or import, address).
// Three launches per size, each fed the CPU executor's inputs and its
// outputs compared bit for bit on every rank; then the teardown leaves
// nothing open. Both IPC modes: in one process both are the owners'
// allocations (legacy handles could not be opened here at all before).
// Skips without a driver; the vmm half without VMM support. Run it also
// under CUDA_DEVICE_MAX_CONNECTIONS=1: every stream of the process then
// shares one hardware queue, the harshest test of the ranks' launch
// order (rankrounds.go).
func TestOpenRankOracle(t *testing.T) {
	if err := cuda.Init(); err != nil {
		if errors.Is(err, cuda.ErrNoDriver) {
			t.Skipf("no CUDA: %v", err)
		}
		t.Fatal(err)
	}
	for _, mode := range []cudadev.IPC{cudadev.IPCVMM, cudadev.IPCLegacy} {
		t.Run(mode.String(), func(t *testing.T) { openRankOracle(t, mode) })
	}
}

func openRankOracle(t *testing.T, mode cudadev.IPC) {
	if ok, why, err := cuda.VMMSupported(0); mode == cudadev.IPCVMM && (err != nil || !ok) {
		t.Skipf("no VMM handles: %s %v", why, err)
	}
	dev := openDevice(t, cudadev.Options{IPC: mode})
	// One node: ranks declared on two nodes in one process would launch
	// in rounds per node only (rankrounds.go groups the ranks whose
	// memory this process maps), so their queued launches could stand
	// before a peer node's in a shared hardware queue. Ranks of other
	// nodes are other processes in real jobs: msccl-bench's
	// TestProcsCUDA runs the socket transport between processes.
	for _, tc := range []struct {
		algo string
		defs map[string]int64
	}{
		{"allreduce_allpairs_packet", map[string]int64{"ranks": 4}},
		{"allreduce_twoshot", map[string]int64{"ranks": 4}},
		{"allgather_direct", map[string]int64{"ranks": 4}},
		{"reducescatter_ring", map[string]int64{"ranks": 4}},
		{"allreduce_hierarchical", map[string]int64{"ranks": 4, "nodes": 2, "gpus_per_node": 2}},
	} {
		t.Run(tc.algo, func(t *testing.T) {
			p := mustCompile(t, tc.algo, tc.defs)
			const launches = 3
			sizes := []int64{4 << 10, 1 << 20}
			reps := make([]*cpu.Report, len(sizes))
			for i, size := range sizes {
				rep, err := cpu.Run(p, cpu.Options{Size: size, DType: ir.F32, Reduce: ir.ReduceSum, Launches: launches})
				if err != nil || !rep.OK() {
					t.Fatalf("CPU executor at %d bytes: %v %v", size, err, rep)
				}
				reps[i] = rep
			}
			errs := commtest.Join(t, []string{"n0", "n0", "n0", "n0"}, dev, 10*time.Second, func(ctx context.Context, c *comm.Comm) error {
				ex, err := OpenRank(ctx, c, p, Options{Timeout: 3 * time.Second})
				if err != nil {
					return err
				}
				run := func() error {
					for i, size := range sizes {
						b, err := ex.Alloc(ctx, size)
						if err != nil {
							return err
						}
						err = aliasCheck(ctx, c, ex, b)
						if err == nil {
							err = oracleLaunches(ctx, c, ex, b, reps[i], launches)
						}
						if err != nil {
							err = fmt.Errorf("%w\n  %s\n  %s", err, strings.Join(ex.SyncMappings(), "\n  "), strings.Join(b.Mappings(), "\n  "))
						}
						if e := b.Free(); err == nil {
							err = e
						}
						if err != nil {
							return fmt.Errorf("at %d bytes: %w", size, err)
						}
					}
					return nil
				}
				err = run()
				if e := ex.Close(); err == nil {
					err = e
				}
				return err
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			if n := dev.Live(); n != 0 {
				t.Errorf("%d allocations or imports left open", n)
			}
		})
	}
}

// oracleLaunches feeds each launch's inputs, runs, and compares this
// rank's output with the CPU executor's where the collective defines it.
func oracleLaunches(ctx context.Context, c *comm.Comm, ex *RankExecutor, b *RankBuffers, rep *cpu.Report, launches int) error {
	r := c.Rank()
	p := ex.Plan()
	// The caller's stream of the last phase is made here, while no
	// kernel of the job runs (the previous buffers' Free waited for
	// every rank's, and nothing launched since). The GPU run of s20run6
	// found vmm allgather_direct and reducescatter_ring one rank's
	// launch short in that phase ("expected token 49, saw 48"), the late
	// ranks launching only after the peers' watchdogs, and stream
	// creation beside the spinning kernels was suspected; with the
	// stream made here, s21 found the same in allreduce_allpairs_packet.
	// The cause was the order of submission: a rank's second Enqueue
	// queued ahead of a peer's first in a hardware queue their streams
	// shared (rankrounds.go), which the ranks' launch rounds now rule
	// out.
	st, err := cuda.NewStream(true)
	if err != nil {
		return err
	}
	// Destroyed after the last barrier, when every rank's work is done.
	defer st.Destroy()
	for k := 0; k < launches; k++ {
		if err := b.SetInput(rep.Inputs[k][r]); err != nil {
			return err
		}
		// Every rank's input is in place before any kernel reads it.
		if err := c.Bootstrap().Barrier(ctx); err != nil {
			return err
		}
		if err := ex.Run(ctx, b, ir.F32, ir.ReduceSum, 16); err != nil {
			return fmt.Errorf("launch %d: %w", k, err)
		}
		got, err := b.OutputOf(r)
		if err != nil {
			return err
		}
		want := rep.Outputs[k][r]
		lo, hi := cpu.DefinedOutput(p, r, int64(len(rep.Inputs[k][0])), int64(len(want)))
		if !bytes.Equal(got[lo:hi], want[lo:hi]) {
			i := lo
			for got[i] == want[i] {
				i++
			}
			return fmt.Errorf("launch %d: output differs from the CPU executor's from byte %d (of [%d, %d))", k, i, lo, hi)
		}
		// Nobody overwrites an input a peer's kernel may still read.
		if err := c.Bootstrap().Barrier(ctx); err != nil {
			return err
		}
	}
	// Queued launches (Start, as msccl-bench times them) end without a
	// hang; their results are not checked (in-place plans reduce their
	// own outputs again).
	queued := fmt.Sprintf("rank %d: Start ×8 called at %v", r, time.Since(oracleOrigin).Round(time.Millisecond))
	err = func() error {
		for range 8 {
			if err := ex.Start(ctx, b, ir.F32, ir.ReduceSum, 16); err != nil {
				return err
			}
		}
		queued += fmt.Sprintf(", returned at %v", time.Since(oracleOrigin).Round(time.Millisecond))
		err := ex.Wait()
		queued += fmt.Sprintf("; Wait returned at %v", time.Since(oracleOrigin).Round(time.Millisecond))
		return err
	}()
	if err := phaseVerdict(ctx, c, "queued launches", err, queued); err != nil {
		return err
	}
	// And on a stream of the caller's (capi's path: Prepare outside any
	// capture, then launches only), two back to back.
	if err := ex.Prepare(b, ir.F32, ir.ReduceSum, 16); err != nil {
		return err
	}
	var line strings.Builder
	fmt.Fprintf(&line, "rank %d:", r)
	err = func() error {
		for k := range 2 {
			start := time.Since(oracleOrigin)
			if err := ex.Enqueue(b, ir.F32, ir.ReduceSum, 16, st); err != nil {
				return err
			}
			end := time.Since(oracleOrigin)
			fmt.Fprintf(&line, " Enqueue %d called at %v, returned at %v;", k, start.Round(time.Millisecond), end.Round(time.Millisecond))
		}
		err := st.Synchronize()
		fmt.Fprintf(&line, " stream synchronized at %v", time.Since(oracleOrigin).Round(time.Millisecond))
		if err != nil {
			return err
		}
		return ex.Wait()
	}()
	if err := phaseVerdict(ctx, c, "launches on the caller's stream", err, line.String()); err != nil {
		return err
	}
	return c.Bootstrap().Barrier(ctx)
}

// oracleOrigin is the one clock origin of every rank's timeline (the
// ranks are goroutines of this process).
var oracleOrigin = time.Now()

// phaseVerdict has the ranks learn each other's outcome of a phase of
// launches (the queued ones, those on the caller's stream) and timeline,
// so that all stop there together and each says what happened. Before, a rank whose launches completed
// went on to the next collective step and failed there with a bootstrap
// error ("comparing message sizes: all-gather #17: rank 3 has closed"),
// which read as if it had never launched; in fact its kernels had run
// after its peers' watchdog gave up. A hang with some ranks clean is the
// signature of a launch held back until the peers' kernels ended (a
// launch queued behind a peer's queued launch in a shared hardware
// queue, which rankrounds.go orders against, or a driver call that waits
// for the GPU); the timelines tell a late submission (an Enqueue that
// returned late) from a late start on the GPU.
func phaseVerdict(ctx context.Context, c *comm.Comm, phase string, err error, line string) error {
	verdict := "ok"
	if err != nil {
		verdict = "failed"
	}
	all, gerr := c.Bootstrap().AllGather(ctx, []byte(verdict+"\n"+line))
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	var failed, clean []string
	var lines []string
	for q, v := range all {
		how, l, _ := strings.Cut(string(v), "\n")
		lines = append(lines, l)
		if how == "ok" {
			clean = append(clean, fmt.Sprint(q))
		} else {
			failed = append(failed, fmt.Sprint(q))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	timelines := "timelines (since the test binary started):\n    " + strings.Join(lines, "\n    ")
	if err == nil {
		return fmt.Errorf("%s: this rank's completed, rank(s) %s failed there (see their errors): this rank's kernels ran only after their watchdog gave up, a launch held back behind a peer's; %s",
			phase, strings.Join(failed, ", "), timelines)
	}
	note := ""
	if len(clean) > 0 {
		note = fmt.Sprintf("; rank(s) %s completed the phase without a hang: their launches started only after this rank's watchdog gave up (held back behind a peer's queued launch in a shared hardware queue, or by a driver call that waited for the GPU)", strings.Join(clean, ", "))
	}
	return fmt.Errorf("%s: %w%s; %s", phase, err, note, timelines)
}

// aliasCheck runs before any launch on b: each rank writes a word of its
// own into the first word of its sync region and the first bytes of its
// output, through its own address; after a barrier every rank reads both
// of every node-local rank through its mapping here; then each puts back
// what the two words held. Not zeros: the sync word is memory channel
// 0's inbound counter, which at the second buffer set holds every signal
// of the first, and the rank's expected counter went on with them (zeros
// there left every 1 MiB case waiting for token 27 on a word that read
// 2). A rank whose mapping of a peer is other memory fails here with the
// rank, the address and the kind of mapping. (A guard: the one rank
// isolated in earlier in-process runs saw the right memory; it had
// launched before its peers, whose kernel loads then waited for its
// kernel's watchdog, rankload.go.)
func aliasCheck(ctx context.Context, c *comm.Comm, ex *RankExecutor, b *RankBuffers) error {
	r := c.Rank()
	word := func(q int) uint64 { return 0x5a5a000000000000 | uint64(q)<<8 | uint64(b.Size()&0xff) }
	sp, err := devPtr(comm.Loc{Mem: ex.conns.Sync[r], Off: 0})
	if err != nil {
		return err
	}
	// No kernel of this rank runs now (the previous buffers' Free waited
	// for every rank's), so the two words hold still while saved.
	var was [2][]byte
	for i, p := range []cuda.DevicePtr{sp, b.Output()} {
		was[i] = make([]byte, 8)
		if err := cuda.MemcpyDtoH(was[i], p); err != nil {
			return err
		}
	}
	put := func(sync, out []byte) error {
		if err := cuda.MemcpyHtoD(sp, sync); err != nil {
			return err
		}
		return cuda.MemcpyHtoD(b.Output(), out)
	}
	w := binary.LittleEndian.AppendUint64(nil, word(r))
	if err := put(w, w); err != nil {
		return err
	}
	if err := c.Bootstrap().Barrier(ctx); err != nil {
		return err
	}
	var bad []string
	got := make([]byte, 8)
	for q, m := range ex.conns.Sync {
		if m == nil {
			continue
		}
		sp, err := devPtr(comm.Loc{Mem: m, Off: 0})
		if err != nil {
			return err
		}
		if err := cuda.MemcpyDtoH(got, sp); err != nil {
			return err
		}
		if v := binary.LittleEndian.Uint64(got); v != word(q) {
			bad = append(bad, fmt.Sprintf("rank %d's sync region (%s) reads %#x, rank %d wrote %#x", q, mappingOf(m), v, q, word(q)))
		}
		if err := cuda.MemcpyDtoH(got, cuda.DevicePtr(b.bufs[q].out)); err != nil {
			return err
		}
		if v := binary.LittleEndian.Uint64(got); v != word(q) {
			bad = append(bad, fmt.Sprintf("rank %d's output (%s) reads %#x, rank %d wrote %#x", q, mappingOf(b.mems[q]), v, q, word(q)))
		}
	}
	if err := c.Bootstrap().Barrier(ctx); err != nil {
		return err
	}
	if err := put(was[0], was[1]); err != nil {
		return err
	}
	// Every rank learns every verdict, so all stop here together.
	verdicts, err := c.Bootstrap().AllGather(ctx, []byte{byte(min(len(bad), 255))})
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("rank %d does not see its peers' memory as they wrote it:\n  %s", r, strings.Join(bad, "\n  "))
	}
	for q, v := range verdicts {
		if len(v) != 1 || v[0] != 0 {
			return fmt.Errorf("rank %d saw other memory than its peers wrote (its report says where)", q)
		}
	}
	return nil
}
