// Command msccl-bench times a plan on the GPU the way nccl-tests does:
// per message size, the time of one collective, algorithm and bus
// bandwidth, and with -c the number of elements that differ from the CPU
// reference executor's result for the same inputs.
//
//	msccl-bench --algo allreduce_twoshot --ranks 8 -b 1K -e 256M -f 2 -d f16 -o sum -c
//	msccl-bench --plan plan.json -b 1K -e 1G -G --json
//	msccl-bench --algo allreduce_twoshot --ranks 8 -b 64M -e 256M -d f16 -c -G --reference allreduce_twoshot
//	msccl-bench --algo allreduce_ring --ranks 8 -b 1K -e 1K -G --trace ring.json
//	msccl-bench --tune --collective allreduce --ranks 8 -b 1K -e 256M -f 4 -d f16 -G --tune-out tuned.yaml
//
// All ranks run in this process on device 0 (see executor/cuda), or where
// --devices puts them: a device per rank (0,1,2,3) or a count N dealt
// round-robin; the header names each rank's device and the peer access
// between them. With
// --device cpu every rank is a process of its own, its buffers in shared
// memory and the plan run on CPU threads (executor/host): --procs N starts
// N of them here, and the same command runs as one rank under torchrun,
// mpirun or srun (procs.go):
//
//	msccl-bench --procs 4 --device cpu --algo allreduce_twoshot --ranks 4 -b 1K -e 1M -f 32 -c
//
// Exit status: 0 when every size ran and none had wrong elements, and
// after -h or --version; 1 when a row has wrong results or was skipped
// (reported after the whole table) or the run could not start; 2 for a
// wrong invocation. Bad input is refused before the GPU is opened, on one
// line: sizes, flags, the plan's size rule, sizes no GPU holds, and with
// -c CPU references above 60% of the host's MemAvailable (or
// $MSCCL_HOST_MEMORY).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/internal/hostmem"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/internal/textdist"
	"github.com/msccl-go/msccl-go/internal/version"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

type defines map[string]int64

func (d defines) String() string { return fmt.Sprint(map[string]int64(d)) }
func (d defines) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("-D wants NAME=VALUE, got %q", s)
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return fmt.Errorf("-D %s: %w", k, err)
	}
	d[k] = n
	return nil
}

type config struct {
	plan, algo, algoDir  string
	defs                 defines
	ranks                int
	minB, maxB           int64
	factor               int64
	dtype                string
	redop                string
	iters, warmup        int
	graph, check, asJSON bool
	ll                   int
	timeout              time.Duration
	perf                 perfConfig // --reference, --trace (perf.go)
	tune                 tuneConfig // --tune (tune.go)
	devices              string     // --devices (devices.go)
	devs                 []int      // --devices resolved for the plan's ranks
}

// Row is one size's result (the --json record).
type Row struct {
	Plan    string  `json:"plan"`
	Ranks   int     `json:"ranks"`
	Bytes   int64   `json:"bytes"`
	Count   int64   `json:"count"`
	Type    string  `json:"type"`
	Redop   string  `json:"redop"`
	TimeUs  float64 `json:"time_us"`
	AlgBW   float64 `json:"algbw_gbps"`
	BusBW   float64 `json:"busbw_gbps"`
	Wrong   int64   `json:"wrong"` // -1: not checked
	Graph   bool    `json:"graph"`
	Skipped string  `json:"skipped,omitempty"`
	// SkipCode is the skip's stable code (ir.ErrorCode: exec.size for a
	// size the plan does not serve, ...), for tools that branch on it.
	SkipCode string  `json:"skip_code,omitempty"`
	Ref      *RefRow `json:"reference,omitempty"` // --reference (perf.go)
	HBM      *HBMRow `json:"hbm,omitempty"`       // --hbm (hbm.go)
}

func main() {
	err := run(os.Args[1:], os.Stdout)
	report(os.Stderr, err)
	os.Exit(exitCode(err))
}

// usageError is a wrong invocation (exit status 2, as flag packages and
// msccl-compile use), as opposed to a run that failed (1).
type usageError struct{ error }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode is the process's status for run's result.
func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

func run(args []string, w io.Writer) (err error) {
	c := config{defs: defines{}}
	defer func() { err = asJSON(err, c.asJSON) }()
	fs := flag.NewFlagSet("msccl-bench", flag.ContinueOnError)
	// The flag package would print the error and then every flag; one
	// line naming the bad flag is easier to read, and -h prints the rest.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.plan, "plan", "", "plan JSON file")
	fs.StringVar(&c.algo, "algo", "", "library algorithm name (algorithms/NAME.msccl)")
	fs.StringVar(&c.algoDir, "algodir", "", "directory of library algorithms (default: the library built into this binary)")
	fs.Var(c.defs, "D", "algorithm parameter NAME=VALUE (repeatable)")
	fs.IntVar(&c.ranks, "ranks", 0, "number of ranks (sets -D ranks=N for --algo; checked against --plan)")
	b := fs.String("b", "1K", "smallest message size")
	e := fs.String("e", "64M", "largest message size")
	fs.Int64Var(&c.factor, "f", 2, "size multiplication factor")
	fs.StringVar(&c.dtype, "d", "f32", "data type: f32 f16 bf16 i32 u32 u8 f8e4m3 f8e5m2")
	fs.StringVar(&c.redop, "o", "sum", "reduction: sum min max prod")
	fs.IntVar(&c.iters, "n", 20, "timed iterations")
	fs.IntVar(&c.warmup, "w", 5, "warm-up iterations")
	fs.BoolVar(&c.graph, "G", false, "time CUDA-graph replays of a captured collective")
	fs.BoolVar(&c.check, "c", false, "check results against the CPU executor (#wrong column: elements of the result the collective defines that differ)")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object per size")
	fs.IntVar(&c.ll, "ll", 16, "LL packet width: 8 or 16")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "watchdog timeout of one wait")
	showVersion := fs.Bool("version", false, "print the build's version and exit")
	showTopo := topoFlag(fs)
	perfFlags(fs, &c.perf)
	tuneFlags(fs, &c.tune)
	pf := addProcFlags(fs)
	devicesFlag(fs, &c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(w, "usage: msccl-bench (--plan PLAN.json | --algo NAME [-D NAME=VALUE]...) [flags]")
			fs.SetOutput(w)
			fs.PrintDefaults()
			return nil
		}
		return usagef("%v (msccl-bench -h lists the flags)", err)
	}
	if *showVersion {
		fmt.Fprintln(w, version.String("msccl-bench"))
		return nil
	}
	if *showTopo {
		return runTopo(fs, w)
	}
	if err := c.check1(fs, *b, *e); err != nil {
		return err
	}
	if err := c.perf.check(); err != nil {
		return err
	}
	if err := pf.check(&c); err != nil {
		return err
	}
	if err := c.checkDevices(pf); err != nil {
		return err
	}
	if err := c.perf.checkHBM(&c, pf); err != nil {
		return err
	}
	if err := c.tune.check(&c, pf); err != nil {
		return err
	}
	if c.tune.on {
		return runTune(&c, &c.tune, w)
	}
	p, name, err := loadPlan(&c)
	if err != nil {
		return err
	}
	if err := c.placeDevices(p); err != nil {
		return err
	}
	sizes := sweep(c.minB, c.maxB, c.factor)
	if err := checkSweep(&c, p, name, sizes); err != nil {
		return err
	}
	if pf.cpuDevice() {
		if err := checkHostDevice(p, name, sizes); err != nil {
			return err
		}
	}
	if pf.procs > 0 {
		return pf.launch(p, name, args, w)
	}
	run := bench
	if pf.perRank() {
		run = pf.benchRank
	}
	rows, err := run(&c, p, name, sizes, w)
	if err != nil {
		return err
	}
	return verdict(rows)
}

// check1 checks the flags on their own, before any file is read.
func (c *config) check1(fs *flag.FlagSet, b, e string) error {
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q: msccl-bench takes flags only (--plan PLAN.json or --algo NAME)", fs.Arg(0))
	}
	var err error
	if c.minB, err = size.Parse(b); err != nil {
		return usagef("-b: %v", err)
	}
	if c.maxB, err = size.Parse(e); err != nil {
		return usagef("-e: %v", err)
	}
	if c.minB > c.maxB {
		return usagef("-b %s is above -e %s: the sweep would be empty", b, e)
	}
	ranksSet := false
	fs.Visit(func(f *flag.Flag) { ranksSet = ranksSet || f.Name == "ranks" })
	switch {
	case ranksSet && c.ranks < 1:
		return usagef("--ranks must be at least 1, got %d", c.ranks)
	case c.factor < 2:
		return usagef("-f must be at least 2, got %d", c.factor)
	case c.iters < 1:
		return usagef("-n must be at least 1, got %d", c.iters)
	case c.warmup < 0:
		return usagef("-w must not be negative, got %d", c.warmup)
	case c.ll != 8 && c.ll != 16:
		return usagef("--ll must be 8 or 16, got %d", c.ll)
	case c.timeout <= 0:
		return usagef("--timeout must be positive, got %v", c.timeout)
	}
	if _, err := ir.ParseDType(c.dtype); err != nil {
		return usagef("-d: %v", err)
	}
	switch ir.ReduceOp(c.redop) {
	case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd:
	default:
		return usagef("-o: unknown reduction %q (want sum, min, max or prod)", c.redop)
	}
	return nil
}

// maxDeviceBytes bounds what one sweep size may need on the device (every
// rank's input, output and scratch together, all ranks being on device
// 0). It is above any GPU's memory today (288 GB at most), so it refuses
// only sizes no GPU could hold, before the allocator is asked for them;
// what fits between it and the real device is the allocator's to refuse
// (that row is skipped and the exit status says so).
const maxDeviceBytes = 512 << 30

// checkSweep refuses the whole sweep before touching the GPU when a size
// cannot be run: outside the plan's rule (a row of wrong results would be
// the plan's geometry, not the GPU's), more than a GPU holds, or, with
// -c, a CPU reference larger than this host's memory.
func checkSweep(c *config, p *ir.Plan, name string, sizes []int64) error {
	largest := sizes[len(sizes)-1]
	if need, err := deviceBytes(p, largest); err == nil && need > maxDeviceBytes {
		return fmt.Errorf("-e: at %s %s needs about %s of device memory (%d ranks on one GPU), more than the %s any GPU holds; lower -e",
			size.Format(largest), name, hostmem.Human(need), len(p.GPUs), size.Format(maxDeviceBytes))
	}
	rule, err := p.SizeRule()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, s := range sizes {
		if err := rule.Check(s); err != nil {
			return fmt.Errorf("%s: %w; pick -b, -e and -f so that every size is in the rule", name, err)
		}
	}
	if c.check {
		return checkRefMemory(p, name, sizes)
	}
	return nil
}

// deviceBytes is what the GPU executor allocates for one size: every
// rank's input, output and scratch (ir.Layout), saturating rather than
// overflowing.
func deviceBytes(p *ir.Plan, msg int64) (int64, error) {
	in, out, err := p.BufferBytes(msg)
	if err != nil {
		return 0, err
	}
	var total int64
	for r := range p.GPUs {
		lay, err := p.Layout(r, in, out)
		if err != nil {
			return 0, err
		}
		for _, n := range []int64{in, out, lay.ScratchAlloc} {
			if n < 0 || total > math.MaxInt64-n {
				return math.MaxInt64, nil
			}
			total += n
		}
	}
	return total, nil
}

// verdict is the run's outcome once the whole table is printed: an error
// (exit status 1) when a row's results differ from the CPU reference or a
// requested size was skipped, so that scripts and CI notice.
func verdict(rows []Row) error {
	var wrong, skipped []string
	for _, r := range rows {
		switch {
		case r.Skipped != "":
			skipped = append(skipped, fmt.Sprintf("%s (%s)", size.Format(r.Bytes), r.Skipped))
		case r.Wrong > 0:
			wrong = append(wrong, fmt.Sprintf("%s (%d wrong)", size.Format(r.Bytes), r.Wrong))
		}
		if r.Ref != nil && r.Ref.Wrong > 0 {
			wrong = append(wrong, fmt.Sprintf("%s (reference %s: %d wrong)", size.Format(r.Bytes), r.Ref.Name, r.Ref.Wrong))
		}
		if r.Ref != nil && r.Ref.Skipped != "" {
			skipped = append(skipped, fmt.Sprintf("%s (reference %s: %s)", size.Format(r.Bytes), r.Ref.Name, r.Ref.Skipped))
		}
	}
	var parts []string
	if len(wrong) > 0 {
		parts = append(parts, fmt.Sprintf("wrong results at %d of %d sizes: %s", len(wrong), len(rows), strings.Join(wrong, ", ")))
	}
	if len(skipped) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d sizes skipped: %s", len(skipped), len(rows), strings.Join(skipped, ", ")))
	}
	if len(parts) == 0 {
		return nil
	}
	// One line: a skip reason may carry newlines (a driver message).
	return errors.New(strings.Join(strings.Fields(strings.Join(parts, "; ")), " "))
}

// sweep lists the sizes min, min*f, ... up to max, stopping before a
// product would overflow.
func sweep(lo, hi, f int64) []int64 {
	var out []int64
	for s := lo; s <= hi; s *= f {
		out = append(out, s)
		if s > math.MaxInt64/f {
			break
		}
	}
	return out
}

func loadPlan(c *config) (*ir.Plan, string, error) {
	switch {
	case c.plan != "" && c.algo != "":
		return nil, "", usagef("give --plan or --algo, not both")
	case c.plan != "":
		data, err := ir.ReadPlanFile(c.plan, 0)
		if err != nil {
			return nil, "", err
		}
		p, _, err := ir.Load(data)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", c.plan, err)
		}
		if c.ranks != 0 && c.ranks != len(p.GPUs) {
			return nil, "", fmt.Errorf("%s has %d ranks, --ranks says %d", c.plan, len(p.GPUs), c.ranks)
		}
		return p, filepath.Base(c.plan), nil
	case c.algo != "":
		path := filepath.Join(c.algoDir, c.algo+".msccl")
		var src []byte
		var err error
		if c.algoDir == "" {
			// The library built into the binary: works from any directory.
			path = "algorithms/" + c.algo + ".msccl"
			if src, err = algorithms.Source(c.algo); err != nil {
				return nil, "", unknownAlgo(c.algo, "")
			}
		} else {
			src, err = os.ReadFile(path)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", unknownAlgo(c.algo, c.algoDir)
		}
		if err != nil {
			return nil, "", err
		}
		if c.ranks != 0 {
			c.defs["ranks"] = int64(c.ranks)
		}
		p, _, ds := compiler.CompileSource(path, src, c.defs, compiler.Options{})
		if ds.HasErrors() {
			return nil, "", fmt.Errorf("%s", ds.String())
		}
		return p, c.algo, nil
	}
	return nil, "", usagef("give --plan PLAN.json or --algo NAME (msccl-bench -h lists the flags)")
}

// unknownAlgo says that the library has no algorithm name, with the
// closest names it has (by edit distance, or sharing the name as a
// prefix such as "allreduce"), or all of them when none is near.
func unknownAlgo(name, dir string) error {
	var names []string
	where := dir
	if dir == "" {
		names, where = algorithms.Names(), "the built-in library"
	} else {
		files, _ := filepath.Glob(filepath.Join(dir, "*.msccl"))
		if len(files) == 0 {
			return fmt.Errorf("--algo %s: %s holds no algorithms (*.msccl); set --algodir", name, dir)
		}
		for _, f := range files {
			names = append(names, strings.TrimSuffix(filepath.Base(f), ".msccl"))
		}
	}
	best := map[string]int{}
	for _, n := range names {
		d := textdist.Levenshtein(name, n)
		if d <= max(2, len(name)/3) || (len(name) >= 3 && strings.HasPrefix(n, name)) {
			best[n] = d
		}
	}
	near := make([]string, 0, len(best))
	for n := range best {
		near = append(near, n)
	}
	sort.Slice(near, func(i, j int) bool {
		if best[near[i]] != best[near[j]] {
			return best[near[i]] < best[near[j]]
		}
		return near[i] < near[j]
	})
	if len(near) > 0 {
		return fmt.Errorf("--algo %s: no such algorithm in %s (did you mean %s?)", name, where, strings.Join(near[:min(3, len(near))], ", "))
	}
	return fmt.Errorf("--algo %s: no such algorithm in %s (it has %s)", name, where, strings.Join(names, ", "))
}

func busFactor(col ir.Collective, n int) float64 {
	f := float64(n-1) / float64(n)
	switch col {
	case ir.AllReduce:
		return 2 * f
	case ir.AllGather, ir.ReduceScatter, ir.AllToAll:
		return f
	}
	return 1
}

// checkJob computes the CPU executor's result for one size off the GPU
// path, so the reference for the next sizes is ready when they are timed.
type checkJob struct {
	rep *cpu.Report
	err error
}

// bench times every size and prints the table; it returns the rows for
// verdict, or an error that ends the sweep (no GPU, a hang).
func bench(c *config, p *ir.Plan, name string, sizes []int64, w io.Writer) ([]Row, error) {
	dt, err := ir.ParseDType(c.dtype)
	if err != nil {
		return nil, err
	}

	red := ir.ReduceOp(c.redop)
	// CPU references, a few sizes ahead, in parallel.
	jobs := make([]chan checkJob, len(sizes))
	if c.check {
		// Start jobs in size order (small ones first) so the first rows
		// never wait behind the largest references.
		slots := make(chan struct{}, max(1, min(4, runtime.NumCPU()/2)))
		mem := refBudget().Bytes
		for i := range sizes {
			jobs[i] = make(chan checkJob, 1)
		}
		go func() {
			for i, s := range sizes {
				slots <- struct{}{}
				go func() {
					rep, err := cpu.Run(p, cpu.Options{Size: s, DType: dt, Reduce: red, Launches: 1, LLWidth: c.ll, MaxMemory: mem})
					jobs[i] <- checkJob{rep, err}
					<-slots
				}()
			}
		}()
	}
	ex, err := cudaexec.Open(p, cudaexec.Options{Timeout: c.timeout, Trace: c.perf.traceRecords(), Devices: c.devs})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	ref, err := c.perf.open(ex, len(sizes))
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	s, err := cuda.NewStream(true)
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	// ev[0] and ev[1] bracket every timed span: the plan's runs, the
	// reference's, the --hbm copy.
	var ev [2]*cuda.Event
	for i := range ev {
		if ev[i], err = cuda.NewEvent(true); err != nil {
			return nil, err
		}
		defer ev[i].Destroy()
	}
	devName, _ := cuda.Device(0).Name()
	n := len(p.GPUs)
	if c.perf.hbm {
		if c.perf.copyRate, err = measureCopy(s, ev[0], ev[1]); err != nil {
			return nil, err
		}
	}
	if !c.asJSON {
		fmt.Fprintf(w, "# msccl-bench: plan %s (%s, %s), %d ranks on %s, %s %s, LL%d, graph %v, %d warm-up + %d timed iterations%s\n",
			name, p.Collective, p.Protocol, n, placement(ex, devName), c.dtype, c.redop, c.ll, c.graph, c.warmup, c.iters, portCopyNote(ex))
		tableHeader(w)
		c.perf.header(w)
		if c.perf.hbm {
			hbmHeader(w, c.perf.copyRate)
		}
	}
	var rows []Row
	for i, msg := range sizes {
		row := Row{Plan: name, Ranks: n, Bytes: msg, Count: msg / int64(dt.Size()), Type: c.dtype, Redop: c.redop, Wrong: -1, Graph: c.graph}
		var job checkJob
		if c.check {
			job = <-jobs[i]
		}
		if err := one(c, ex, ref, p, dt, red, s, ev[0], ev[1], &row, job); err != nil {
			if ir.ErrorCode(err) == ir.CodeWatchdog {
				return nil, err
			}
			row.Skipped, row.SkipCode = err.Error(), ir.ErrorCode(err)
		}
		rows = append(rows, row)
		if err := printRow(w, c, row); err != nil {
			return nil, err
		}
		if !c.asJSON && row.Skipped == "" {
			printRef(w, &row)
			printHBM(w, &row)
		}
	}
	return rows, nil
}

// tableHeader prints the column titles of the table.
func tableHeader(w io.Writer) {
	fmt.Fprintf(w, "#%12s %12s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "#%12s %12s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "")
}

// printRow prints one size: a table line, or a JSON object with --json.
func printRow(w io.Writer, c *config, row Row) error {
	if c.asJSON {
		return json.NewEncoder(w).Encode(row)
	}
	if row.Skipped != "" {
		_, err := fmt.Fprintf(w, " %12d %12d %6s %6s   skipped: %s\n", row.Bytes, row.Count, row.Type, row.Redop, row.Skipped)
		return err
	}
	wrong := "N/A"
	if row.Wrong >= 0 {
		wrong = strconv.FormatInt(row.Wrong, 10)
	}
	_, err := fmt.Fprintf(w, " %12d %12d %6s %6s %10.2f %8.2f %8.2f %7s\n", row.Bytes, row.Count, row.Type, row.Redop, row.TimeUs, row.AlgBW, row.BusBW, wrong)
	return err
}

// one measures one size.
func one(c *config, ex *cudaexec.Executor, ref *cudaexec.Reference, p *ir.Plan, dt ir.DType, red ir.ReduceOp, s *cuda.Stream, ev0, ev1 *cuda.Event, row *Row, job checkJob) error {
	step := stepper(row.Bytes)
	step("alloc")
	bufs, err := ex.Alloc(row.Bytes)
	if err != nil {
		return err
	}
	defer func() {
		// The scratch bound to these buffers is as large as they are:
		// return it now rather than when 16 sizes have been cached.
		ex.Release(bufs)
		bufs.Free()
	}()
	call := cudaexec.Call{Buffers: bufs, DType: dt, Reduce: red, LLWidth: c.ll, Stream: s}
	step("prepare")
	if err := ex.Prepare(call); err != nil {
		return err
	}
	if c.check {
		if job.err != nil {
			return fmt.Errorf("CPU executor: %w", job.err)
		}
		step("check run")
		wrong, err := checkOnce(ex, p, call, job.rep, step)
		if err != nil {
			return err
		}
		row.Wrong = wrong
	}
	step("timed runs")
	sec, err := timeRuns(c, ex, call, ev0, ev1)
	if err != nil {
		return err
	}
	step("done")
	row.TimeUs = sec * 1e6
	row.AlgBW = float64(row.Bytes) / sec / 1e9
	row.BusBW = row.AlgBW * busFactor(p.Collective, len(p.GPUs))
	if c.perf.hbm {
		row.HBM = hbmRow(p, c.ll, row, c.perf.copyRate)
	}
	if err := c.perf.writeTrace(ex, p, call, row); err != nil {
		return err
	}
	if ref != nil {
		row.Ref = oneReference(c, ref, p, call, ev0, ev1, row, job)
	}
	return nil
}

// checkOnce feeds the CPU executor's inputs, runs once and counts the
// output elements that differ from its outputs.
func checkOnce(ex runner, p *ir.Plan, call cudaexec.Call, rep *cpu.Report, step func(string)) (int64, error) {
	if !rep.OK() {
		return 0, fmt.Errorf("the CPU executor rejects the plan at this size: %s", rep.Verdict)
	}
	b := call.Buffers
	for r := range p.GPUs {
		in := rep.Inputs[0][r]
		if err := cuda.MemcpyHtoDAsync(b.In[r], unsafe.Pointer(&in[0]), int64(len(in)), call.Stream); err != nil {
			return 0, err
		}
	}
	step("check: inputs queued; Run")
	if err := ex.Run(call); err != nil {
		return 0, err
	}
	step("check: Wait")
	if err := ex.Wait(call.Stream); err != nil {
		return 0, err
	}
	step("check: compare")
	es := int64(1)
	switch call.DType {
	case ir.F32, ir.I32, ir.U32:
		es = 4
	case ir.F16, ir.BF16:
		es = 2
	}
	var wrong int64
	for r := range p.GPUs {
		// The CPU executor's output of rank r starts where b.Out[r] does
		// (for an in-place reducescatter that is chunk r of the input, not
		// its start: comparing from b.In[r] counted other ranks' chunks
		// as wrong).
		want := rep.Outputs[0][r]
		got := make([]byte, len(want))
		if err := cuda.MemcpyDtoH(got, b.Out[r]); err != nil {
			return 0, err
		}
		lo, hi := cpu.DefinedOutput(p, r, b.InBytes, int64(len(want)))
		wrong += diffElems(got, want, lo, hi, es)
	}
	return wrong, nil
}

// diffElems counts the elements of es bytes in [lo, hi) where got and
// want differ.
func diffElems(got, want []byte, lo, hi, es int64) int64 {
	var wrong int64
	for i := lo; i+es <= hi; i += es {
		if string(got[i:i+es]) != string(want[i:i+es]) {
			wrong++
		}
	}
	return wrong
}

// stepper returns a function that, when MSCCL_DEBUG is set, writes each
// step of one size to standard error with the time since the first: a
// run that stops without a watchdog report (a driver call that never
// returns) then shows where.
func stepper(size int64) func(string) {
	if os.Getenv("MSCCL_DEBUG") == "" {
		return func(string) {}
	}
	t0 := time.Now()
	return func(what string) {
		fmt.Fprintf(os.Stderr, "# debug: %d bytes: %s at +%v\n", size, what, time.Since(t0).Round(time.Microsecond))
	}
}
