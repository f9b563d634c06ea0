package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"gopkg.in/yaml.v3"
)

// tuneConfig holds --tune's flags: sweep library algorithms × instances ×
// threads per block over the sizes, and write the fastest per size as
// selection rows (issue 17).
type tuneConfig struct {
	on         bool
	collective string
	out        string
	algos      string
	instances  intList
	threads    intList
	budget     time.Duration
	table      string
}

// intList is a comma-separated list of positive integers.
type intList []int64

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(s string) error {
	var out intList
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || v < 1 {
			return fmt.Errorf("want positive integers separated by commas, got %q", s)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

func tuneFlags(fs *flag.FlagSet, t *tuneConfig) {
	t.instances = intList{1, 2, 4, 8, 16}
	t.threads = intList{256, 512, 1024}
	fs.BoolVar(&t.on, "tune", false, "time every library algorithm of --collective at every -D instances and threads of --tune-instances × --tune-threads over the sweep, print the fastest per size, and write them as selection rows to --tune-out")
	fs.StringVar(&t.collective, "collective", "", "with --tune: the collective to tune (allreduce, allgather, reducescatter, alltoall)")
	fs.StringVar(&t.out, "tune-out", "", "with --tune: the selection YAML to write (rows for this world only, in the format of algorithms/selection.yaml)")
	fs.StringVar(&t.algos, "tune-algos", "", "with --tune: comma-separated library algorithms to try (default: those the built-in selection table names for the collective on one node)")
	fs.Var(&t.instances, "tune-instances", "with --tune: values of -D instances to try")
	fs.Var(&t.threads, "tune-threads", "with --tune: values of -D threads (threads per block) to try")
	fs.StringVar(&t.table, "tune-table", "", "with --tune: also write the built-in selection table with this world's rows of --collective handed to the tuned ones, every other line kept (a drop-in for algorithms/selection.yaml)")
	fs.DurationVar(&t.budget, "tune-budget", 0, "with --tune: start no candidate after this much time (e.g. 5m), so that a run under a time limit still writes rows from what it timed; 0: no limit")
}

// check refuses --tune combined with what it does not do, before any
// file is read or the GPU opened.
func (t *tuneConfig) check(c *config, pf *procFlags) error {
	if !t.on {
		if t.collective != "" || t.out != "" || t.algos != "" || t.budget != 0 || t.table != "" {
			return usagef("--collective, --tune-out, --tune-table, --tune-algos and --tune-budget go with --tune")
		}
		return nil
	}
	switch {
	case t.collective == "":
		return usagef("--tune needs --collective (allreduce, allgather, reducescatter, alltoall)")
	case t.out == "":
		return usagef("--tune needs --tune-out FILE.yaml for the selection rows")
	case c.ranks < 2:
		return usagef("--tune needs --ranks N (2 or more)")
	case c.plan != "" || c.algo != "":
		return usagef("--tune picks the algorithms itself: drop --plan/--algo (restrict them with --tune-algos)")
	case c.check || c.perf.reference != "" || c.perf.trace != "" || pf.procs > 0 || pf.cpuDevice():
		return usagef("--tune only times plans on the GPU: drop -c, --reference, --trace, --procs and --device cpu (check the chosen rows with msccl-bench -c --algo NAME -D ...)")
	case len(c.defs) > 0:
		return usagef("--tune sets -D itself (instances, threads): drop -D")
	case t.budget < 0:
		return usagef("--tune-budget: %v is negative", t.budget)
	}
	for _, v := range t.threads {
		if v < 32 || v > 1024 {
			return usagef("--tune-threads: %d is outside 32..1024", v)
		}
	}
	for _, v := range t.instances {
		if v > 64 {
			return usagef("--tune-instances: %d is above 64", v)
		}
	}
	if _, err := t.algorithms(); err != nil {
		return usageError{err}
	}
	return nil
}

// algorithms lists the library algorithms to try.
func (t *tuneConfig) algorithms() ([]string, error) {
	if t.algos != "" {
		var out []string
		for _, a := range strings.Split(t.algos, ",") {
			a = strings.TrimSpace(a)
			if _, err := algorithms.Source(a); err != nil {
				return nil, fmt.Errorf("--tune-algos: %w", unknownAlgo(a, ""))
			}
			out = append(out, a)
		}
		return out, nil
	}
	rows, err := shippedRows()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range rows {
		a := strings.TrimSuffix(path.Base(r.Algorithm), ".msccl")
		if r.Collective == t.collective && !r.MultiNode && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--collective %s: the built-in selection table names no algorithm for it (have allreduce, allgather, reducescatter, alltoall)", t.collective)
	}
	return out, nil
}

// shippedRows reads the built-in selection table.
func shippedRows() ([]compiler.SelectionRow, error) {
	data, err := fs.ReadFile(algorithms.FS(), algorithms.Selection)
	if err != nil {
		return nil, err
	}
	var rows []compiler.SelectionRow
	if err := yaml.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("algorithms/%s: %w", algorithms.Selection, err)
	}
	return rows, nil
}

// candidate is one configuration the tuner times.
type candidate struct {
	algo               string
	instances, threads int64
}

func (c candidate) label() string {
	return fmt.Sprintf("%s instances=%d threads=%d", c.algo, c.instances, c.threads)
}

// tuneResult is one candidate's time at one size.
type tuneResult struct {
	cand  candidate
	bytes int64
	us    float64
	busbw float64
}

// runTune compiles and times every candidate, prints the winners per size
// and writes the selection rows.
func runTune(c *config, t *tuneConfig, w io.Writer) error {
	algos, err := t.algorithms()
	if err != nil {
		return err
	}
	cands := candidates(algos, t.instances, t.threads)
	// Without a GPU every candidate would fail alike: say so once.
	devName, fit, err := tuneGPU.open()
	if err != nil {
		return err
	}
	sizes := sweep(c.minB, c.maxB, c.factor)
	prog := newProgress(tuneGPU.log, len(cands))
	var results []tuneResult
	var hang error
	var untimed []string
	for i, cand := range cands {
		if t.budget > 0 && time.Since(prog.start) > t.budget {
			for _, u := range cands[i:] {
				untimed = append(untimed, u.label())
			}
			prog.note(fmt.Sprintf("--tune-budget %v spent: %d candidates not timed", t.budget, len(untimed)))
			break
		}
		prog.step(i, cand.label())
		rs, err := tuneOne(c, cand, sizes, fit, w)
		if ir.ErrorCode(err) == ir.CodeWatchdog {
			// A hung kernel keeps its SMs: later candidates could not be
			// resident. Stop, show what was measured, write no rows.
			hang = fmt.Errorf("%s: %w", cand.label(), err)
			break
		}
		if err != nil {
			prog.note(fmt.Sprintf("%s: skipped: %v", cand.label(), oneLine(err)))
			continue
		}
		results = append(results, rs...)
		prog.note(cand.label() + ": " + summary(rs))
	}
	prog.done()
	if len(results) == 0 {
		if hang != nil {
			return hang
		}
		return fmt.Errorf("--tune: no candidate ran at any size")
	}
	best := winners(results)
	shipped := shippedPicks(t.collective, c.ranks, sizes)
	if !c.asJSON {
		fmt.Fprintf(w, "# msccl-bench --tune: %s, %d ranks on one %s, %s %s, graph %v, %d warm-up + %d timed iterations, %d candidates\n",
			t.collective, c.ranks, devName, c.dtype, c.redop, c.graph, c.warmup, c.iters, len(cands))
		printWinners(w, best, results, shipped)
	}
	if hang != nil {
		return fmt.Errorf("the sweep stopped (the table shows the candidates before it; no rows written): %w", hang)
	}
	rows := tunedRows(t.collective, c.ranks, best)
	head := fmt.Sprintf("# Tuned by msccl-bench --tune on one %s, %d ranks in one process, %s %s, %s (%s).\n",
		devName, c.ranks, c.dtype, c.redop, time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.Join(os.Args[1:], " "))
	if len(untimed) > 0 {
		head += fmt.Sprintf("# Not timed (--tune-budget %v spent): %s.\n", t.budget, strings.Join(untimed, "; "))
	}
	if err := os.WriteFile(t.out, []byte(head+formatRows(rows)), 0o644); err != nil {
		return err
	}
	if t.table != "" {
		shipped, err := fs.ReadFile(algorithms.FS(), algorithms.Selection)
		if err != nil {
			return err
		}
		note := fmt.Sprintf("# %s at %d ranks: tuned by msccl-bench --tune on one %s, %s %s, %s.\n",
			t.collective, c.ranks, devName, c.dtype, c.redop, time.Now().UTC().Format("2006-01-02"))
		merged, err := mergeTable(shipped, t.collective, int64(c.ranks), rows, note)
		if err != nil {
			return err
		}
		if err := os.WriteFile(t.table, merged, 0o644); err != nil {
			return err
		}
	}
	if !c.asJSON {
		fmt.Fprintf(w, "# wrote %d selection rows to %s\n", len(rows), t.out)
	}
	return nil
}

// tuneOne compiles one candidate and times it at the sizes its rule
// admits.
func tuneOne(c *config, cand candidate, sizes []int64, fit residency, w io.Writer) ([]tuneResult, error) {
	src, err := algorithms.Source(cand.algo)
	if err != nil {
		return nil, err
	}
	defs := map[string]int64{"ranks": int64(c.ranks), "instances": cand.instances, "threads": cand.threads}
	p, _, ds := compiler.CompileSource("algorithms/"+cand.algo+".msccl", src, defs, compiler.Options{})
	if ds.HasErrors() {
		return nil, errors.New(ds.String())
	}
	if err := fit.check(p); err != nil {
		return nil, err
	}
	rule, err := p.SizeRule()
	if err != nil {
		return nil, err
	}
	var admitted []int64
	for _, s := range sizes {
		if need, err := deviceBytes(p, s); rule.Admits(s) && err == nil && need <= maxDeviceBytes {
			admitted = append(admitted, s)
		}
	}
	if len(admitted) == 0 {
		return nil, fmt.Errorf("no size of the sweep is in its rule (%s)", rule)
	}
	cc := *c
	cc.defs = defs
	rows, err := tuneGPU.time(&cc, p, cand.label(), admitted)
	if err != nil {
		return nil, err
	}
	var out []tuneResult
	for _, r := range rows {
		if c.asJSON {
			if err := printRow(w, c, r); err != nil {
				return nil, err
			}
		}
		if r.Skipped == "" {
			out = append(out, tuneResult{cand, r.Bytes, r.TimeUs, r.BusBW})
		}
	}
	if len(out) == 0 && len(rows) > 0 {
		return nil, errors.New(rows[0].Skipped)
	}
	return out, nil
}

// candidates lists the configurations to time, the algorithms
// interleaved (every algorithm at a shape before the next shape), so that
// a sweep cut short by --tune-budget loses the same shapes of each rather
// than whole algorithms.
func candidates(algos []string, instances, threads intList) []candidate {
	var out []candidate
	for _, in := range instances {
		for _, th := range threads {
			for _, a := range algos {
				out = append(out, candidate{a, in, th})
			}
		}
	}
	return out
}

// residency is what device 0 can hold at once: every block of every rank
// must be resident (they wait on each other), so a candidate past these
// bounds is refused by the executor at every size; checking it first
// skips the executor's setup and buffers for it.
type residency struct{ sms, threadsPerSM, blocksPerSM int }

// tuneGPU is the device as the tuner uses it, apart so that a test can run
// the whole sweep on a model of one (tunerun_test.go).
var tuneGPU = struct {
	open func() (name string, fit residency, err error)
	time func(c *config, p *ir.Plan, label string, sizes []int64) ([]Row, error)
	log  io.Writer // the progress
}{
	open: func() (string, residency, error) {
		if err := cuda.Init(); err != nil {
			return "", residency{}, err
		}
		name, _ := cuda.Device(0).Name()
		fit, err := deviceFit()
		return name, fit, err
	},
	time: func(c *config, p *ir.Plan, label string, sizes []int64) ([]Row, error) {
		return bench(c, p, label, sizes, io.Discard)
	},
	log: os.Stderr,
}

func deviceFit() (residency, error) {
	var f residency
	var err error
	d := cuda.Device(0)
	if f.sms, err = d.Attribute(cuda.AttrMultiprocessorCount); err != nil {
		return f, err
	}
	if f.threadsPerSM, err = d.Attribute(cuda.AttrMaxThreadsPerMultiprocessor); err != nil {
		return f, err
	}
	f.blocksPerSM, err = d.Attribute(cuda.AttrMaxBlocksPerMultiprocessor)
	return f, err
}

// check refuses a plan that cannot be resident whatever its registers
// and shared memory: more threads or blocks than the multiprocessors
// hold (the executor's exact check, with the kernel's occupancy, still
// runs for the rest).
func (f residency) check(p *ir.Plan) error {
	var blocks int64
	for _, g := range p.GPUs {
		blocks += int64(len(g.ThreadBlocks))
	}
	threads := blocks * int64(p.NumThreadsPerBlock)
	switch {
	case blocks > int64(f.sms*f.blocksPerSM):
		return fmt.Errorf("cannot be resident: %d blocks on %d multiprocessors of at most %d blocks", blocks, f.sms, f.blocksPerSM)
	case threads > int64(f.sms*f.threadsPerSM):
		return fmt.Errorf("cannot be resident: %d blocks of %d threads on %d multiprocessors of at most %d threads", blocks, p.NumThreadsPerBlock, f.sms, f.threadsPerSM)
	}
	return nil
}

// winners keeps the fastest result of each size, in size order.
func winners(rs []tuneResult) []tuneResult {
	by := map[int64]tuneResult{}
	for _, r := range rs {
		if b, ok := by[r.bytes]; !ok || r.us < b.us {
			by[r.bytes] = r
		}
	}
	out := make([]tuneResult, 0, len(by))
	for _, r := range by {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bytes < out[j].bytes })
	return out
}

// shippedPicks names, per size, the candidate that the built-in selection
// table runs today (its defaults for params a row does not set), so the
// table can show what tuning gains; sizes without a row are absent.
func shippedPicks(collective string, ranks int, sizes []int64) map[int64]candidate {
	rows, err := shippedRows()
	out := map[int64]candidate{}
	if err != nil {
		return out
	}
	for _, s := range sizes {
		for _, r := range rows {
			if r.Collective != collective || r.MultiNode || !inRange(r.Ranks, int64(ranks)) || !inRange(r.RanksPerNode, int64(ranks)) {
				continue
			}
			lo, err1 := size.ParseBound(r.MinSize, 0)
			hi, err2 := size.ParseBound(r.MaxSize, math.MaxUint64)
			if err1 != nil || err2 != nil || uint64(s) < lo || (uint64(s) >= hi && hi != math.MaxUint64) {
				continue
			}
			cand := candidate{algo: strings.TrimSuffix(path.Base(r.Algorithm), ".msccl"), instances: 1, threads: 1024}
			if v, ok := r.Defines["instances"]; ok {
				cand.instances = v
			}
			if v, ok := r.Defines["threads"]; ok {
				cand.threads = v
			}
			out[s] = cand
			break
		}
	}
	return out
}

func inRange(r []int64, v int64) bool { return r == nil || (len(r) == 2 && v >= r[0] && v <= r[1]) }

// printWinners prints, per size, the fastest candidate and the one the
// built-in table picks today (N/A where that one was not among the
// candidates or did not run).
func printWinners(w io.Writer, best, all []tuneResult, shipped map[int64]candidate) {
	fmt.Fprintf(w, "#%12s %10s %8s  %-46s %10s %8s %8s  %s\n", "size", "time", "busbw", "fastest", "shipped", "shipped", "speedup", "shipped pick")
	fmt.Fprintf(w, "#%12s %10s %8s  %-46s %10s %8s %8s\n", "(B)", "(us)", "(GB/s)", "", "(us)", "(GB/s)", "")
	for _, b := range best {
		st, sb, sp, sl := "N/A", "N/A", "N/A", "none"
		if cand, ok := shipped[b.bytes]; ok {
			sl = cand.label()
			for _, r := range all {
				if r.bytes == b.bytes && r.cand == cand {
					st, sb, sp = fmt.Sprintf("%.2f", r.us), fmt.Sprintf("%.2f", r.busbw), fmt.Sprintf("%.2f", r.us/b.us)
				}
			}
		}
		fmt.Fprintf(w, " %12d %10.2f %8.2f  %-46s %10s %8s %8s  %s\n", b.bytes, b.us, b.busbw, b.cand.label(), st, sb, sp, sl)
	}
}

// tunedRows turns the winners into selection rows for this world: runs of
// sizes with the same winner become one row, from the run's first size
// to the next run's first size (inf for the last). A winner admits the
// size it won at, so its plan's minimum is never above its row's start.
// Below the smallest size timed nothing was measured, and a winner's plan
// may not even run there (eight instances of the LL all-pairs start at
// 1 KiB): the first row starts at that size, and mergeTable keeps the
// built-in rows below it.
func tunedRows(collective string, ranks int, best []tuneResult) []compiler.SelectionRow {
	var rows []compiler.SelectionRow
	var cur candidate
	for i, b := range best {
		if i > 0 && b.cand == cur {
			continue
		}
		lo := size.Format(b.bytes)
		if i > 0 {
			rows[len(rows)-1].MaxSize = lo
		}
		cur = b.cand
		rows = append(rows, compiler.SelectionRow{
			Collective: collective, Ranks: []int64{int64(ranks), int64(ranks)}, RanksPerNode: []int64{int64(ranks), int64(ranks)},
			MinSize: lo, MaxSize: "inf", Algorithm: b.cand.algo + ".msccl",
			Defines: map[string]int64{"instances": b.cand.instances, "threads": b.cand.threads},
		})
	}
	return rows
}

// formatRows writes rows as algorithms/selection.yaml does.
func formatRows(rows []compiler.SelectionRow) string {
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "- collective: %s\n", r.Collective)
		fmt.Fprintf(&b, "  ranks: [%d, %d]\n", r.Ranks[0], r.Ranks[1])
		fmt.Fprintf(&b, "  ranks_per_node: [%d, %d]\n", r.RanksPerNode[0], r.RanksPerNode[1])
		fmt.Fprintf(&b, "  min_message_size: %s\n", r.MinSize)
		fmt.Fprintf(&b, "  max_message_size: %s\n", r.MaxSize)
		fmt.Fprintf(&b, "  algorithm: %s\n", r.Algorithm)
		if len(r.Defines) > 0 {
			keys := make([]string, 0, len(r.Defines))
			for k := range r.Defines {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for j, k := range keys {
				parts[j] = fmt.Sprintf("%s: %d", k, r.Defines[k])
			}
			fmt.Fprintf(&b, "  defines: {%s}\n", strings.Join(parts, ", "))
		}
	}
	return b.String()
}

// progress reports the sweep on standard error: a redrawn bar on a
// terminal, one line per candidate otherwise (a log stays readable).
type progress struct {
	w     io.Writer
	n     int
	tty   bool
	start time.Time
}

func newProgress(w io.Writer, n int) *progress {
	p := &progress{w: w, n: n, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		st, err := f.Stat()
		p.tty = err == nil && st.Mode()&os.ModeCharDevice != 0
	}
	return p
}

func (p *progress) step(i int, what string) {
	el := time.Since(p.start).Round(time.Second)
	if !p.tty {
		fmt.Fprintf(p.w, "tune %d/%d (%v): %s\n", i+1, p.n, el, what)
		return
	}
	const width = 30
	fill := width * i / p.n
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d %v %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill), i+1, p.n, el, what)
}

func (p *progress) note(s string) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, "tune:", s)
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// summary is one candidate's times in a line, for the progress log: a
// sweep cut short (a timeout around the command) still leaves its data.
func summary(rs []tuneResult) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s %.1fus", size.Format(r.bytes), r.us)
	}
	return strings.Join(parts, ", ")
}

// oneLine joins an error's lines (compiler diagnostics, driver messages).
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
