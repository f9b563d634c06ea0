package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/executor/cpu"
	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/executor/cuda/reference"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// perfConfig holds the flags for measuring the executor kernel itself
// (issue 17): a hand-written reference beside the plan, and a GPU
// timeline.
type perfConfig struct {
	reference string
	trace     string
	multi     bool    // the sweep has several sizes: one trace pair per size
	hbm       bool    // --hbm (hbm.go)
	copyRate  float64 // --hbm: the run's copy rate, read+write bytes/s
}

// traceRecords is the timeline's room per block and launch: far more ops
// than a library plan runs per block (pipelines count once per window);
// a trace that needed more says how many records it dropped.
const traceRecords = 1 << 14

func perfFlags(fs *flag.FlagSet, p *perfConfig) {
	fs.StringVar(&p.trace, "trace", "", "time the traced kernel instance, which records every op's start and end on the GPU (%globaltimer), and write the last launch's Chrome/Perfetto trace to FILE.json and the CPU executor's simulated trace of the plan to FILE.cpu.json (FILE-SIZE.json and FILE-SIZE.cpu.json per size when the sweep has several)")
	hbmFlag(fs, p)
	fs.StringVar(&p.reference, "reference", "", "also time the hand-written kernel NAME (allreduce_oneshot_ll, allreduce_twoshot, allgather_direct: executor/cuda/reference) on the plan's streams, grid and buffers, check it with -c, and print plan/reference time")
}

// check validates the flags before any file is read or the GPU opened.
func (p *perfConfig) check() error {
	if p.reference != "" {
		if _, err := reference.Lookup(p.reference); err != nil {
			return usagef("--reference: %v", err)
		}
	}
	if p.trace != "" && !strings.HasSuffix(p.trace, ".json") {
		return usagef("--trace %s: the file name must end in .json (the CPU trace goes beside it as .cpu.json)", p.trace)
	}
	return nil
}

// traceRecords is Options.Trace: 0 (the untraced instance) without --trace.
func (p *perfConfig) traceRecords() int {
	if p.trace == "" {
		return 0
	}
	return traceRecords
}

// header states, under the table's header, what --trace costs.
func (p *perfConfig) header(w io.Writer) {
	if p.trace != "" {
		fmt.Fprintf(w, "# --trace: these times are of the traced kernel instance (a block barrier and one %%globaltimer record per op); run without --trace for the plain kernel\n")
	}
}

// tracePaths names the GPU and CPU trace files of one size.
func (p *perfConfig) tracePaths(msg int64) (gpu, cpu string) {
	base := strings.TrimSuffix(p.trace, ".json")
	if p.multi {
		base += "-" + size.Format(msg)
	}
	return base + ".json", base + ".cpu.json"
}

// writeTrace writes the timeline of the last launch and, beside it, the
// CPU executor's simulated timeline of the same plan, size, type and
// reduction (same process, thread and op names: internal/chrometrace).
func (p *perfConfig) writeTrace(ex *cudaexec.Executor, plan *ir.Plan, call cudaexec.Call, row *Row) error {
	if p.trace == "" {
		return nil
	}
	tl, err := ex.Timeline()
	if err != nil {
		return err
	}
	gpuJSON, err := tl.ChromeJSON()
	if err != nil {
		return err
	}
	if tl.Dropped > 0 {
		fmt.Fprintf(os.Stderr, "msccl-bench: --trace at %s: %d op records dropped (more than %d per block)\n", size.Format(row.Bytes), tl.Dropped, traceRecords)
	}
	rep, err := cpu.Run(plan, cpu.Options{Size: row.Bytes, DType: call.DType, Reduce: call.Reduce, Launches: 1, LLWidth: call.LLWidth, Trace: true, MaxMemory: refBudget().Bytes})
	if err != nil {
		return fmt.Errorf("--trace: CPU executor: %w", err)
	}
	gpuPath, cpuPath := p.tracePaths(row.Bytes)
	if err := os.WriteFile(gpuPath, gpuJSON, 0o644); err != nil {
		return err
	}
	return os.WriteFile(cpuPath, rep.Trace, 0o644)
}

// open prepares the reference kernel on the plan's executor (nil without
// --reference).
func (p *perfConfig) open(ex *cudaexec.Executor, sizes int) (*cudaexec.Reference, error) {
	p.multi = sizes > 1
	if p.reference == "" {
		return nil, nil
	}
	return ex.Reference(p.reference)
}

// RefRow is the reference kernel's result for one size (Row.Ref).
type RefRow struct {
	Name   string  `json:"name"`
	TimeUs float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_gbps"`
	BusBW  float64 `json:"busbw_gbps"`
	Wrong  int64   `json:"wrong"` // -1: not checked
	// Ratio is the plan's time over the reference's: 1 is parity, 2 means
	// the plan takes twice as long.
	Ratio   float64 `json:"plan_over_reference"`
	Skipped string  `json:"skipped,omitempty"`
	HBM     *HBMRow `json:"hbm,omitempty"` // --hbm (hbm.go)
}

// runner is what timeRuns and checkOnce drive: the plan's executor or a
// reference kernel on it.
type runner interface {
	Run(cudaexec.Call) error
	Capture(cudaexec.Call) (*cudaexec.Graph, error)
	Wait(*cuda.Stream) error
}

// timeRuns times c.iters runs (or graph replays) after c.warmup, between
// two events on call.Stream; it returns seconds per run.
func timeRuns(c *config, r runner, call cudaexec.Call, ev0, ev1 *cuda.Event) (float64, error) {
	s := call.Stream
	launch := func() error { return r.Run(call) }
	if c.graph {
		g, err := r.Capture(call)
		if err != nil {
			return 0, err
		}
		defer g.Destroy()
		launch = g.Launch
	}
	for i := 0; i < c.warmup; i++ {
		if err := launch(); err != nil {
			return 0, err
		}
	}
	if err := ev0.Record(s); err != nil {
		return 0, err
	}
	for i := 0; i < c.iters; i++ {
		if err := launch(); err != nil {
			return 0, err
		}
	}
	if err := ev1.Record(s); err != nil {
		return 0, err
	}
	if err := r.Wait(s); err != nil {
		return 0, err
	}
	ms, err := cuda.Elapsed(ev0, ev1)
	if err != nil {
		return 0, err
	}
	return float64(ms) / 1e3 / float64(c.iters), nil
}

// oneReference checks (with -c) and times the reference kernel on the
// plan's buffers for this size, right after the plan.
func oneReference(c *config, ref *cudaexec.Reference, p *ir.Plan, call cudaexec.Call, ev0, ev1 *cuda.Event, row *Row, job checkJob) *RefRow {
	rr := &RefRow{Name: ref.Name(), Wrong: -1}
	defer ref.Release(call.Buffers)
	if err := ref.Prepare(call); err != nil {
		rr.Skipped = err.Error()
		return rr
	}
	if c.check && job.err == nil {
		wrong, err := checkOnce(ref, p, call, job.rep, stepper(row.Bytes))
		if err != nil {
			rr.Skipped = err.Error()
			return rr
		}
		rr.Wrong = wrong
	}
	sec, err := timeRuns(c, ref, call, ev0, ev1)
	if err != nil {
		rr.Skipped = err.Error()
		return rr
	}
	rr.TimeUs = sec * 1e6
	rr.AlgBW = float64(row.Bytes) / sec / 1e9
	rr.BusBW = rr.AlgBW * busFactor(p.Collective, len(p.GPUs))
	rr.Ratio = row.TimeUs / rr.TimeUs
	if c.perf.hbm {
		rr.HBM = refHBM(rr.Name, p, row.Bytes, rr.TimeUs, c.perf.copyRate)
	}
	return rr
}

// printRef prints the reference's line under the plan's row.
func printRef(w io.Writer, row *Row) {
	r := row.Ref
	if r == nil {
		return
	}
	if r.Skipped != "" {
		fmt.Fprintf(w, "#%12s reference %s skipped: %s\n", "", r.Name, r.Skipped)
		return
	}
	wrong := "N/A"
	if r.Wrong >= 0 {
		wrong = strconv.FormatInt(r.Wrong, 10)
	}
	fmt.Fprintf(w, "#%12s %-26s %10.2f %8.2f %8.2f %7s  plan/reference %.2f\n", "", "reference "+r.Name, r.TimeUs, r.AlgBW, r.BusBW, wrong, r.Ratio)
}
