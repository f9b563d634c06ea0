package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// procFlags are --procs and --device: one process per rank.
type procFlags struct {
	procs  int
	nodes  int
	device string
	// watchdog is --timeout: a rank stopped that long ends the job.
	watchdog time.Duration
}

func addProcFlags(fs *flag.FlagSet) *procFlags {
	pf := &procFlags{}
	fs.IntVar(&pf.procs, "procs", 0, "start N local processes of this program, one rank each (needs --device cpu or cuda); the same binary also runs as one rank under torchrun, mpirun or srun")
	fs.IntVar(&pf.nodes, "nodes", 1, "with --procs: declare the processes on K nodes of equal size (MSCCL_NODE node0, node1, ... by rank / (N/K)), so that port channels between them go through the socket transport as between machines")
	fs.StringVar(&pf.device, "device", "", "where the ranks run: cuda (every rank in this process on GPU 0, the default; one rank per process and GPU under --procs or a launcher: GPUs by local rank, or round-robin with MSCCL_CUDA_DEVICE=round-robin, which --procs sets) or cpu (one rank per process, buffers in shared memory, plans run on CPU threads)")
	return pf
}

// check refuses combinations that cannot run, before any file is read.
func (pf *procFlags) check(c *config) error {
	pf.watchdog = c.timeout
	switch pf.device {
	case "", "cuda", "cpu":
	default:
		return usagef("--device: unknown device %q (want cuda or cpu)", pf.device)
	}
	switch {
	case pf.procs < 0:
		return usagef("--procs must be at least 1, got %d", pf.procs)
	case pf.nodes < 1:
		return usagef("--nodes must be at least 1, got %d", pf.nodes)
	case pf.nodes > 1 && pf.procs == 0:
		return usagef("--nodes %d needs --procs (under a launcher, set MSCCL_NODE per process)", pf.nodes)
	case pf.nodes > 1 && pf.procs%pf.nodes != 0:
		return usagef("--nodes %d does not divide --procs %d into equal nodes", pf.nodes, pf.procs)
	case pf.procs > 0 && pf.device == "":
		return usagef("--procs %d needs --device cpu or --device cuda", pf.procs)
	case pf.device == "cpu" && c.graph:
		return usagef("-G (CUDA graphs) needs --device cuda")
	case pf.device == "cpu" && (c.perf.reference != "" || c.perf.trace != ""):
		return usagef("--reference and --trace measure GPU kernels: they need --device cuda")
	case pf.perRank() && (c.graph || c.perf.reference != "" || c.perf.trace != ""):
		return usagef("-G, --reference and --trace need every rank in one process (--device cuda without --procs or a launcher)")
	}
	return nil
}

// cpuDevice reports whether ranks run on the CPU device.
func (pf *procFlags) cpuDevice() bool { return pf.device == "cpu" }

// perRank reports whether this process runs one rank of a job of one
// process per rank (or, with --procs, launches one): always on the cpu
// device; on cuda when --procs is given or the environment describes a
// job of several processes (torchrun, mpirun, srun, or --procs's
// children), else every rank runs in this process.
func (pf *procFlags) perRank() bool {
	switch pf.device {
	case "cpu":
		return true
	case "", "cuda":
		if pf.procs > 0 {
			return true
		}
		cfg, err := bootstrap.FromEnv()
		return err == nil && cfg.World > 1
	}
	return false
}

// deviceName is the communicator's device of a per-rank run.
func (pf *procFlags) deviceName() string {
	if pf.device == "cpu" {
		return "cpu"
	}
	return "cuda"
}

// launch starts --procs processes of this program with the same
// arguments (less --procs), one rank each, and waits for them. Rank 0's
// standard output is the table; every rank's errors go to standard error
// prefixed with its rank. When a rank fails, the others get a moment to
// report it themselves (naming the rank, as their bootstrap or watchdog
// tells them) and are then killed; a rank stopped (SIGSTOP) as long as
// the watchdog's timeout counts as failed, and is killed too: the launcher
// exits non-zero naming the first rank that failed and why, and leaves no
// process behind (children die with it too, and on SIGINT/SIGTERM).
func (pf *procFlags) launch(p *ir.Plan, name string, args []string, w io.Writer) error {
	if pf.procs != len(p.GPUs) {
		return fmt.Errorf("--procs %d: %s has %d ranks, one process each; give --procs %d", pf.procs, name, len(p.GPUs), len(p.GPUs))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errw := &rankWriters{w: os.Stderr}
	per := pf.procs / pf.nodes
	job, err := bootstrap.Spawn(ctx, bootstrap.SpawnConfig{
		N:         pf.procs,
		Argv:      append([]string{""}, withoutFlag(withoutFlag(args, "procs"), "nodes")...),
		Linger:    launchLinger,
		StopLimit: pf.watchdog,
		RankEnv: func(r int) []string {
			var env []string
			if pf.nodes > 1 {
				env = append(env, fmt.Sprintf("MSCCL_NODE=node%d", r/per))
			}
			// One machine may have fewer GPUs than ranks (one H200
			// hosts a whole job); round-robin gives each rank its own
			// GPU where there are enough.
			if pf.deviceName() == "cuda" && os.Getenv("MSCCL_CUDA_DEVICE") == "" {
				env = append(env, "MSCCL_CUDA_DEVICE=round-robin")
			}
			return env
		},
		Stdout: func(r int) io.Writer {
			if r == 0 {
				return w
			}
			return io.Discard
		},
		Stderr: errw.rank,
	})
	if err != nil {
		return err
	}
	_, err = job.Wait()
	errw.flush()
	if err != nil {
		return fmt.Errorf("%d processes: %w", pf.procs, err)
	}
	return nil
}

// launchLinger is how long the other ranks get, after one failed, to
// exit on their own: a dead rank is known to its peers through the
// bootstrap within milliseconds; a stopped one only after their watchdog
// (--timeout), by which time the first to give up has already failed.
const launchLinger = 2 * time.Second

// withoutFlag drops -name/--name with its value (separate or after =).
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		bare := strings.TrimLeft(a, "-")
		if len(bare) < len(a) && len(a)-len(bare) <= 2 {
			if bare == name {
				i++ // the value follows
				continue
			}
			if strings.HasPrefix(bare, name+"=") {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// rankWriters prefix each rank's lines with "[rank N] " on one writer,
// a line at a time so that ranks do not interleave mid-line.
type rankWriters struct {
	mu  sync.Mutex
	w   io.Writer
	all []*rankLines
}

type rankLines struct {
	p   *rankWriters
	tag string
	buf []byte
}

func (p *rankWriters) rank(r int) io.Writer {
	l := &rankLines{p: p, tag: fmt.Sprintf("[rank %d] ", r)}
	p.mu.Lock()
	p.all = append(p.all, l)
	p.mu.Unlock()
	return l
}

func (l *rankLines) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Fprintf(l.p.w, "%s%s", l.tag, l.buf[:i+1])
		l.buf = l.buf[i+1:]
	}
}

// flush writes what is left of unfinished lines.
func (p *rankWriters) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.all {
		if len(l.buf) > 0 {
			fmt.Fprintf(p.w, "%s%s\n", l.tag, l.buf)
			l.buf = nil
		}
	}
}

// benchRank runs this process's rank of the sweep on the cpu or cuda
// device: the job comes from the environment (--procs, torchrun, mpirun,
// srun).
// Rank 0 times the collective between barriers, checks every rank's
// result against the CPU executor's through the shared buffers (-c) and
// prints the table; the other ranks print nothing but errors.
func (pf *procFlags) benchRank(c *config, p *ir.Plan, name string, sizes []int64, w io.Writer) (_ []Row, failure error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dt, err := ir.ParseDType(c.dtype)
	if err != nil {
		return nil, err
	}
	red := ir.ReduceOp(c.redop)
	rc, err := msccl.OpenComm(ctx, msccl.CommOptions{Device: pf.deviceName()})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// Runs before Close: whatever this rank gives up on (a size or plan
	// its device refuses, a cancelled run), the others fail at once
	// quoting it, not half a second later saying only that it left.
	defer func() {
		if failure != nil {
			rc.Fail(failure)
		}
	}()
	if rc.Size() != len(p.GPUs) {
		return nil, fmt.Errorf("%s has %d ranks, but this job has %d (run it with --procs %d, or under a launcher with %d processes)", name, len(p.GPUs), rc.Size(), len(p.GPUs), len(p.GPUs))
	}
	ex, err := rc.Open(ctx, p, msccl.Options{Timeout: c.timeout, LLWidth: c.ll})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	lead := rc.Rank() == 0
	// Rank 0's CPU references, in size order and at most one size ahead
	// of the runs, so that memory holds two references whatever the sweep.
	var refs chan checkJob
	if c.check && lead {
		refs = make(chan checkJob)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for _, s := range sizes {
				rep, err := cpu.Run(p, cpu.Options{Size: s, DType: dt, Reduce: red, Launches: 1, LLWidth: c.ll, MaxMemory: refBudget().Bytes})
				select {
				case refs <- checkJob{rep, err}:
				case <-done:
					return
				}
			}
		}()
	}
	n := len(p.GPUs)
	if lead && !c.asJSON {
		host, _ := os.Hostname()
		dev := rc.Device() + " device"
		if rc.Device() == "cuda" {
			dev += ", port copies by sm"
			for r := range n {
				if !rc.SameNode(r) {
					dev += " within a node, by the socket transport's proxies between nodes"
					break
				}
			}
		}
		fmt.Fprintf(w, "# msccl-bench: plan %s (%s, %s), %d ranks in %d processes on the %s (%s), %s %s, LL%d, %d warm-up + %d timed iterations\n",
			name, p.Collective, p.Protocol, n, n, dev, host, c.dtype, c.redop, c.ll, c.warmup, c.iters)
		tableHeader(w)
	}
	var rows []Row
	for _, msg := range sizes {
		row := Row{Plan: name, Ranks: n, Bytes: msg, Count: msg / int64(dt.Size()), Type: c.dtype, Redop: c.redop, Wrong: -1}
		var job checkJob
		if refs != nil {
			job = <-refs
		}
		if err := oneRank(ctx, c, rc, ex, p, dt, red, &row, job); err != nil {
			// A failed collective leaves the ranks out of step: end the
			// sweep (every rank fails the same way, naming the cause).
			return nil, fmt.Errorf("at %d bytes: %w", msg, err)
		}
		rows = append(rows, row)
		if lead {
			if err := printRow(w, c, row); err != nil {
				return nil, err
			}
		}
	}
	if !lead {
		return nil, nil
	}
	return rows, nil
}

// oneRank measures one size on this rank.
func oneRank(ctx context.Context, c *config, rc *msccl.RankComm, ex *msccl.RankExec, p *ir.Plan, dt ir.DType, red ir.ReduceOp, row *Row, job checkJob) error {
	b, err := ex.Alloc(ctx, row.Bytes)
	if err != nil {
		return err
	}
	defer b.Free()
	lead := rc.Rank() == 0
	if c.check {
		in, err := cpu.Input(p, cpu.Options{Size: row.Bytes, DType: dt}, 0, rc.Rank())
		if err != nil {
			return err
		}
		if err := b.SetInput(in); err != nil {
			return err
		}
		if err := ex.Run(ctx, b, dt, red); err != nil {
			return err
		}
		// Every rank's kernel is done: rank 0 reads all outputs through
		// the shared buffers (ranks on other nodes send theirs), then
		// lets the others overwrite them.
		if err := rc.Barrier(ctx); err != nil {
			return err
		}
		if !lead && !rc.SameNode(0) {
			out, err := b.OutputOf(rc.Rank())
			if err != nil {
				return err
			}
			if err := rc.Send(ctx, 0, tagOutput, out); err != nil {
				return err
			}
		}
		var cerr error
		if lead {
			row.Wrong, cerr = countWrong(p, b, job, int64(dt.Size()), func(r int) ([]byte, error) {
				if rc.SameNode(r) {
					return b.OutputOf(r)
				}
				return rc.Recv(ctx, r, tagOutput)
			})
		}
		if err := rc.Barrier(ctx); err != nil {
			return err
		}
		if cerr != nil {
			return cerr
		}
	}
	// Start and Wait: on the cuda device the launches queue on the
	// rank's stream (no wait each); on the cpu device Start is Run. The
	// collective is done when every rank is, hence the barrier.
	launches := func(n int) error {
		for range n {
			if err := ex.Start(ctx, b, dt, red); err != nil {
				return err
			}
		}
		if err := ex.Wait(); err != nil {
			return err
		}
		return rc.Barrier(ctx)
	}
	if err := launches(c.warmup); err != nil {
		return err
	}
	var sec float64
	if rc.Device() == "cuda" {
		// CUDA events around the launches on a stream of this rank's,
		// as the in-process rows are timed: the host's closing barrier
		// (a socket round trip, about a millisecond) stays out of the
		// figure instead of adding a millisecond / -n to each row.
		var err error
		if sec, err = eventTime(rc, ex, b, dt, red, c.iters); err != nil {
			return err
		}
		if err := rc.Barrier(ctx); err != nil {
			return err
		}
	} else {
		t0 := time.Now()
		if err := launches(c.iters); err != nil {
			return err
		}
		sec = time.Since(t0).Seconds() / float64(c.iters)
	}
	row.TimeUs = sec * 1e6
	row.AlgBW = float64(row.Bytes) / sec / 1e9
	row.BusBW = row.AlgBW * busFactor(p.Collective, len(p.GPUs))
	return nil
}

// tagOutput carries a rank's output to rank 0 for -c when they are on
// different nodes.
const tagOutput = 1

// countWrong compares every rank's output, read through the shared
// buffers or received, with the CPU executor's.
func countWrong(p *ir.Plan, b *msccl.RankBuffers, job checkJob, es int64, output func(r int) ([]byte, error)) (int64, error) {
	if job.err != nil {
		return 0, fmt.Errorf("CPU executor: %w", job.err)
	}
	if !job.rep.OK() {
		return 0, fmt.Errorf("the CPU executor rejects the plan at this size: %s", job.rep.Verdict)
	}
	in := int64(len(job.rep.Inputs[0][0]))
	var wrong int64
	for r := range p.GPUs {
		got, err := output(r)
		if err != nil {
			return 0, err
		}
		want := job.rep.Outputs[0][r]
		lo, hi := cpu.DefinedOutput(p, r, in, int64(len(want)))
		wrong += diffElems(got, want, lo, hi, es)
	}
	return wrong, nil
}

// eventTime enqueues n collectives on a stream of its own in the rank's
// context between two timing events and returns the mean seconds of
// one. The kernels of the other ranks run from their own processes, so
// the span starts when this rank's first kernel is queued: after the
// warm-up's barrier, the ranks queue theirs within that barrier's skew.
func eventTime(rc *msccl.RankComm, ex *msccl.RankExec, b *msccl.RankBuffers, dt ir.DType, red ir.ReduceOp, n int) (float64, error) {
	var sec float64
	err := rc.Do(func() error {
		s, err := cuda.NewStream(true)
		if err != nil {
			return err
		}
		defer s.Destroy()
		var ev [2]*cuda.Event
		for i := range ev {
			if ev[i], err = cuda.NewEvent(true); err != nil {
				return err
			}
			defer ev[i].Destroy()
		}
		if err := ev[0].Record(s); err != nil {
			return err
		}
		for range n {
			if err := ex.Enqueue(b, dt, red, s.Handle()); err != nil {
				return err
			}
		}
		if err := ev[1].Record(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		ms, err := cuda.Elapsed(ev[0], ev[1])
		sec = float64(ms) / 1e3 / float64(n)
		return err
	})
	if err != nil {
		return 0, err
	}
	// The watchdog's findings of those launches, as Wait reports them.
	return sec, ex.Wait()
}
