package cudaexec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The GPU tests compare every launch of every case with the CPU executor,
// byte for byte. The CPU oracle is the slow side (one core per case), so
// cases run concurrently on the CPU and stream each finished launch to the
// GPU (cpu.Options.OnLaunch): the GPU runs that launch twice — eagerly and
// by replaying a CUDA graph, on separate buffers fed the same inputs — and
// the outputs are compared while the CPU computes the next launch. Memory
// stays at two launches per case whatever the launch count. The inputs
// cross to the device once (the graph's are a device copy), the eager
// outputs come back and are compared with the CPU's on the host, and the
// graph's are compared with the eager ones on the device
// (oracle_stage_test.go): graph = eager = CPU, byte for byte.

// gpuMu serialises GPU work: an executor is not safe for concurrent use,
// and kernels of two executors sharing the device could starve each
// other of SMs (a rank's blocks spin waiting for a peer that cannot be
// scheduled) and trip the watchdog.
var gpuMu sync.Mutex

type gcase struct {
	size     int64
	dt       cpu.DType
	red      ir.ReduceOp
	launches int
	ll       int
}

func (c gcase) String() string {
	return fmt.Sprintf("%d/%s/%s/ll%d/x%d", c.size, c.dt, c.red, c.ll, c.launches)
}

// matrix is the case list of issue 4. Every case runs eager and under
// CUDA-graph replay. The default trims the CPU oracle's work: every type
// and reduction at 1 MiB and at an uneven size, every reduction in f32 at
// 1 KiB, f32 and bf16 at 64 MiB (2 launches), and an LL8 run.
// MSCCL_GPU_QUICK=1 keeps f32 sum per size; MSCCL_GPU_FULL=1 runs the whole
// matrix: {1 KiB, 1 MiB, 64 MiB, uneven} × {f32, f16, bf16, i32, f8e4m3,
// f8e5m2} × {sum, min, max where the plan reduces} × 10 launches.
// MSCCL_GPU_DTYPES=f8e4m3,f8e5m2 (any types) keeps only the cases of those
// types, the LL8 case in the first of them, to run one type's matrix alone.
func matrix(p *ir.Plan) []gcase {
	n := int64(len(p.GPUs))
	// Not a multiple of the chunk count in 16-byte units: chunks of
	// different lengths in uniform scratch slots (plans whose rule needs
	// even splits get the next size their rule admits, below).
	uneven := 16 * (n*1009 + 3)
	dts := []cpu.DType{cpu.F32, cpu.F16, cpu.BF16, cpu.I32}
	reds := []ir.ReduceOp{ir.ReduceSum}
	if reduces(p) {
		reds = append(reds, ir.ReduceMin, ir.ReduceMax)
	}
	ll8 := gcase{size: uneven, dt: cpu.BF16, red: ir.ReduceSum, launches: 4, ll: 8}
	var cs []gcase
	switch {
	case os.Getenv("MSCCL_GPU_FULL") != "":
		// Big sizes first: they take longest on the CPU.
		for _, sz := range []int64{64 << 20, 1 << 20, uneven, 1 << 10} {
			for _, dt := range append(dts, cpu.F8E4M3, cpu.F8E5M2) {
				for _, red := range reds {
					cs = append(cs, gcase{size: sz, dt: dt, red: red, launches: 10, ll: 16})
				}
			}
		}
	case os.Getenv("MSCCL_GPU_QUICK") != "":
		for _, sz := range []int64{64 << 20, 1 << 20, uneven, 1 << 10} {
			cs = append(cs, gcase{size: sz, dt: cpu.F32, red: ir.ReduceSum, launches: 10, ll: 16})
		}
	default:
		for _, dt := range []cpu.DType{cpu.F32, cpu.BF16} {
			cs = append(cs, gcase{size: 64 << 20, dt: dt, red: ir.ReduceSum, launches: 2, ll: 16})
		}
		for _, sz := range []int64{1 << 20, uneven} {
			for _, dt := range dts {
				for _, red := range reds {
					cs = append(cs, gcase{size: sz, dt: dt, red: red, launches: 10, ll: 16})
				}
			}
		}
		for _, red := range reds {
			cs = append(cs, gcase{size: 1 << 10, dt: cpu.F32, red: red, launches: 10, ll: 16})
		}
	}
	cs = append(cs, ll8)
	if only := os.Getenv("MSCCL_GPU_DTYPES"); only != "" {
		cs = onlyDTypes(cs, only)
	}
	// Sizes outside the plan's rule are refused by both executors; move
	// each to the next size the rule admits, so the matrix still holds a
	// size that is not a power of two.
	rule, err := p.SizeRule()
	if err != nil {
		return nil
	}
	for i := range cs {
		if n, ok := rule.Next(cs[i].size); ok {
			cs[i].size = n
		}
	}
	return cs
}

// onlyDTypes keeps the cases whose type is in the comma-separated list;
// a type of the list that the matrix does not hold (FP8 outside
// MSCCL_GPU_FULL) gets the f32 cases' sizes and reductions. The LL8 case
// runs in the list's first type. Unknown names are ignored, so a typo
// shows up as a short case list in -v output rather than a panic.
func onlyDTypes(cs []gcase, list string) []gcase {
	var want []cpu.DType
	for _, n := range strings.Split(list, ",") {
		if d, err := cpu.ParseDType(strings.TrimSpace(n)); err == nil {
			want = append(want, d)
		}
	}
	if len(want) == 0 {
		return nil
	}
	var out []gcase
	for _, d := range want {
		held := false
		for _, c := range cs {
			if c.dt == d && c.ll != 8 {
				out, held = append(out, c), true
			}
		}
		if held {
			continue
		}
		for _, c := range cs {
			if c.dt == cpu.F32 && c.ll != 8 {
				c.dt = d
				out = append(out, c)
			}
		}
	}
	for _, c := range cs {
		if c.ll == 8 {
			c.dt = want[0]
			out = append(out, c)
		}
	}
	return out
}

// runMode says which of eager launches and graph replays run:
// MSCCL_GPU_MODES=eager or =graph keeps one (to tell which hangs), else both.
var runMode = func() [2]bool {
	switch os.Getenv("MSCCL_GPU_MODES") {
	case "eager":
		return [2]bool{true, false}
	case "graph":
		return [2]bool{false, true}
	}
	return [2]bool{true, true}
}()

// cpuSlots bounds concurrent CPU-oracle runs (one core each; a case gives
// its slot back while it waits for and drives the GPU, so every core
// simulates while the GPU works); cpuMem bounds the host memory they and
// their pinned staging hold.
var (
	cpuSlots = make(chan struct{}, max(1, runtime.NumCPU()-1))
	cpuMem   = newWeightSem(envBytes("MSCCL_GPU_TEST_MEM", 64<<30))
	// cpuBuffers keeps the CPU runs' arrays between cases (the 18 types ×
	// reductions of a size have the same lengths), so a case reuses
	// memory instead of faulting fresh pages in (cpu.Buffers).
	cpuBuffers = cpu.NewBuffers(envBytes("MSCCL_GPU_CPU_POOL", 16<<30))
)

func envBytes(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

type weightSem struct {
	mu         sync.Mutex
	cond       *sync.Cond
	cap, taken int64
}

func newWeightSem(c int64) *weightSem {
	s := &weightSem{cap: c}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// acquire takes w (at most the capacity, so one huge case still runs alone).
func (s *weightSem) acquire(w int64) int64 {
	w = min(w, s.cap)
	s.mu.Lock()
	for s.taken+w > s.cap {
		s.cond.Wait()
	}
	s.taken += w
	s.mu.Unlock()
	return w
}

func (s *weightSem) release(w int64) {
	s.mu.Lock()
	s.taken -= w
	s.mu.Unlock()
	s.cond.Broadcast()
}

// gpuError marks an error from the GPU side of a case (as opposed to the
// CPU executor refusing the case).
type gpuError struct{ err error }

func (g gpuError) Error() string { return g.err.Error() }
func (g gpuError) Unwrap() error { return g.err }

// caseRun is one case in flight: the CPU executor's run and, set up at
// its first finished launch, the GPU buffers it is replayed on.
type caseRun struct {
	e          *Executor
	p          *ir.Plan
	c          gcase
	n          int
	inN, outN  int64
	s          *cuda.Stream
	cs         *cuda.Stream // the outputs' copy to the host, outside gpuMu
	bufs       [2]*Buffers  // eager, graph
	g          *Graph
	side       *gpuSide
	diff       *diffKernel   // compares the graph's outputs with the eager run's
	pin        *cuda.HostMem // [n inputs][n outputs of the run compared on the host][n piece offsets]
	devIn      bool          // inputs are built on the device from their pieces (oracle_stage_test.go)
	pieces     int64         // pieces of an input (cpu.InputPiece bytes each)
	at         []int64       // scratch for cpu.InputPieces
	tabHost    [][]byte      // per rank: the table its input's pieces come from
	offDev     cuda.DevicePtr
	devDiff    bool        // both modes run: the graph's outputs are compared on the device
	graphDiff  [][2]uint64 // per rank: bytes where graph and eager differ, the first one
	mismatches int
	first      error
	gpuTime    time.Duration
	gpuWait    time.Duration // waiting for gpuMu and then for a CPU slot again
	lastGPU    time.Duration
}

// outBytes is how many output bytes per rank the CPU executor reports.
func outBytes(p *ir.Plan, in, out int64) int64 {
	// In place, a reducescatter's (scatter's) output is rank r's slice of
	// its input and an allgather's (gather's) input a slice of its output:
	// the CPU executor reports the output bytes from where the output
	// starts, as Buffers.Out[r] points there.
	switch {
	case p.InPlace && (p.Collective.Scatters() || p.Collective.Gathers()):
		return out
	case p.InPlace:
		return max(in, out)
	}
	return out
}

// hostRun is the run whose outputs come back to the host: eager unless
// only graph replays run.
func hostRun() int {
	if runMode[0] {
		return 0
	}
	return 1
}

// stageBytes is the pinned staging a case needs: every rank's input, one
// run's output and the piece offsets of its input.
func stageBytes(n int, in, outN int64) int64 { return int64(n) * (in + outN + 8*inputPieces(in)) }

func inputPieces(in int64) int64 { return (in + cpu.InputPiece - 1) / cpu.InputPiece }

func (cr *caseRun) outOff(r int) int64 {
	return int64(cr.n)*cr.inN + int64(r)*cr.outN
}

func (cr *caseRun) call(k int) Call {
	return Call{Buffers: cr.bufs[k], DType: cr.c.dt, Reduce: cr.c.red, LLWidth: cr.c.ll, Stream: cr.s}
}

// setup allocates both buffer sets, prepares them and captures the graph;
// gpuMu is held.
func (cr *caseRun) setup() error {
	var err error
	for k := range cr.bufs {
		if cr.bufs[k], err = cr.e.Alloc(cr.c.size); err != nil {
			return err
		}
		if err := cr.e.Prepare(cr.call(k)); err != nil {
			return err
		}
	}
	if cr.devIn {
		if cr.offDev, err = cuda.Malloc(max(8, int64(cr.n)*cr.pieces*8)); err != nil {
			return err
		}
	}
	if !copyLocked {
		if cr.cs, err = cuda.NewStream(true); err != nil {
			return err
		}
	}
	cr.g, err = cr.e.Capture(cr.call(1))
	return err
}

// teardown frees what setup made; gpuMu is held.
func (cr *caseRun) teardown() {
	if cr.g != nil {
		cr.g.Destroy()
	}
	for _, b := range cr.bufs {
		if b != nil {
			cr.e.Release(b)
			b.Free()
		}
	}
	if cr.offDev != 0 {
		cuda.Free(cr.offDev)
	}
	if cr.cs != nil {
		cr.cs.Destroy()
	}
	if cr.pin != nil {
		staging.put(cr.pin)
	} else {
		staging.cancel(stageBytes(cr.n, cr.inN, cr.outN))
	}
}

// launch is the OnLaunch callback: run launch l on the GPU, eagerly and by
// graph replay, with the CPU executor's inputs and compare the outputs.
func (cr *caseRun) launch(l int, inputs, outputs [][]byte) error {
	if cr.pin == nil {
		// Under gpuMu: pinning host memory may take driver locks that the
		// proxy of a running port-channel plan needs.
		gpuMu.Lock()
		pin, err := staging.get(stageBytes(cr.n, cr.inN, cr.outN))
		gpuMu.Unlock()
		if err != nil {
			return gpuError{err}
		}
		cr.pin = pin
	}
	for r := 0; r < cr.n; r++ {
		// Launches past the first hand no inputs when they are built on
		// the device (cpu.Options.OnLaunchInputs); they are not read then.
		staged := !cr.devIn || l == 0
		if staged && int64(len(inputs[r])) != cr.inN || int64(len(outputs[r])) != cr.outN {
			return gpuError{fmt.Errorf("rank %d: CPU executor buffers are %d/%d bytes, GPU %d/%d", r, len(inputs[r]), len(outputs[r]), cr.inN, cr.outN)}
		}
		if staged {
			copy(cr.pin.Bytes[int64(r)*cr.inN:], inputs[r])
		}
		if cr.devIn {
			cr.stagePieces(l, r)
		}
	}
	// The GPU runs one case at a time: give the core to another case's
	// simulation meanwhile.
	<-cpuSlots
	st := time.Now()
	err := cr.onGPU(l)
	if err == nil && cr.cs != nil {
		cst := time.Now()
		err = cr.copyOut()
		cr.lastGPU += time.Since(cst)
		cr.gpuTime += time.Since(cst)
	}
	// The slot is taken back before the wait is counted: when more cases
	// are ready to simulate than there are cores, waiting for it is not
	// CPU time (counted as such, a FULL pass summed to four times the
	// core-seconds the machine has).
	cpuSlots <- struct{}{}
	cr.gpuWait += time.Since(st) - cr.lastGPU
	if err != nil {
		return gpuError{err}
	}
	how := [2]string{"eager", "graph"}
	hk := hostRun()
	for r := 0; r < cr.n; r++ {
		off := cr.outOff(r)
		got, want := cr.pin.Bytes[off:off+cr.outN], outputs[r]
		hostOK := bytes.Equal(got, want)
		if !hostOK {
			cr.mismatch(fmt.Errorf("%s launch %d rank %d: output differs from the CPU executor (%s)", how[hk], l, r, diffWords(got, want)))
		}
		if !cr.devDiff {
			continue
		}
		switch count, first := cr.graphDiff[r][0], cr.graphDiff[r][1]; {
		case count != 0:
			eager := "equals the CPU executor's"
			if !hostOK {
				eager = "differs from the CPU executor's too"
			}
			cr.mismatch(fmt.Errorf("graph launch %d rank %d: output differs from the eager run's, compared on the device (%d of %d bytes, first at byte %d); the eager output %s", l, r, count, cr.outN, first, eager))
		case !hostOK:
			cr.mismatch(fmt.Errorf("graph launch %d rank %d: output equals the eager run's, which differs from the CPU executor", l, r))
		}
	}
	return nil
}

// mismatch counts one launch·rank output that differs and keeps the first.
func (cr *caseRun) mismatch(err error) {
	cr.mismatches++
	if cr.first == nil {
		cr.first = err
	}
}

// diffWords says how many bytes of got differ from want and where the
// first is.
func diffWords(got, want []byte) string {
	i, wrong := 0, 0
	for i < len(got) && got[i] == want[i] {
		i++
	}
	for j := range got {
		if got[j] != want[j] {
			wrong++
		}
	}
	return fmt.Sprintf("%d of %d bytes, first at byte %d", wrong, len(want), i)
}

func (cr *caseRun) onGPU(l int) error {
	gpuMu.Lock()
	defer gpuMu.Unlock()
	st := time.Now()
	defer func() { cr.lastGPU = time.Since(st); cr.gpuTime += cr.lastGPU }()
	if l == 0 {
		if err := cr.setup(); err != nil {
			return err
		}
	}
	// Inputs reach the run compared on the host (built on the device, or
	// over the bus); the other run's buffers get a device copy before
	// either runs (in-place plans overwrite their inputs).
	hk := hostRun()
	if err := cr.inputsToDevice(l, hk); err != nil {
		return err
	}
	for r := 0; cr.devDiff && r < cr.n; r++ {
		if err := cuda.MemcpyAsync(cr.bufs[1].In[r], cr.bufs[0].In[r], cr.inN, cr.s); err != nil {
			return err
		}
	}
	if runMode[0] {
		if err := cr.e.Run(cr.call(0)); err != nil {
			return err
		}
	}
	if runMode[1] {
		if err := cr.g.Launch(); err != nil {
			return err
		}
	}
	if cr.devDiff {
		ptrs := make([][2]cuda.DevicePtr, cr.n)
		for r := range ptrs {
			ptrs[r] = [2]cuda.DevicePtr{cr.bufs[1].Out[r], cr.bufs[0].Out[r]}
		}
		if err := cr.diff.enqueue(cr.s, ptrs, cr.outN); err != nil {
			return err
		}
	}
	for r := 0; cr.cs == nil && r < cr.n; r++ {
		if err := cuda.MemcpyAsync(cr.pin.Dev+cuda.DevicePtr(cr.outOff(r)), cr.bufs[hk].Out[r], cr.outN, cr.s); err != nil {
			return err
		}
	}
	if err := cr.e.Wait(cr.s); err != nil {
		return err
	}
	if cr.devDiff {
		// The kernel's results are shared by the plan's cases: read them
		// before gpuMu is let go.
		cr.graphDiff = cr.graphDiff[:0]
		for r := 0; r < cr.n; r++ {
			count, first := cr.diff.result(r)
			cr.graphDiff = append(cr.graphDiff, [2]uint64{count, first})
		}
	}
	return nil
}

// caseResult is one case's outcome: ok, skipped (with why), or failed.
type caseResult struct {
	skip     string
	err      error
	cpu, gpu time.Duration
	wait     time.Duration // for the GPU and a CPU slot after it
	hung     bool
}

func runCase(g *gpuSide, p *ir.Plan, c gcase) caseResult {
	in, out, err := p.BufferBytes(c.size)
	if err != nil {
		return caseResult{skip: err.Error()}
	}
	n := len(p.GPUs)
	cr := &caseRun{e: g.e, s: g.s, p: p, c: c, n: n, inN: in, outN: outBytes(p, in, out),
		side: g, diff: g.diff, devDiff: runMode[0] && runMode[1], devIn: !hostInputs,
		pieces: inputPieces(in), tabHost: make([][]byte, n)}
	// The CPU executor's arrays, two launches' streamed inputs and
	// outputs, its scratch and packet store, and the pinned staging (an
	// 8-rank allreduce at 64 MiB: 4 GiB and 0.75 GiB of scratch; the
	// BenchmarkOracleCPU process peaks at 4 GiB resident).
	// Packet plans hold only the packet store (half the scratch bytes):
	// counting a scratch array they never make halved how many of their
	// cases ran at once.
	w := int64(n) * (in + out + 3*(in+cr.outN))
	holds := cpu.HoldsScratch(p)
	for r := range p.GPUs {
		if lay, err := p.Layout(r, in, out); err == nil {
			w += lay.ScratchAlloc / 2
			if holds {
				w += lay.ScratchAlloc
			}
		}
	}
	w = cpuMem.acquire(w)
	defer cpuMem.release(w)
	cpuSlots <- struct{}{}
	defer func() { <-cpuSlots }()
	defer func() {
		gpuMu.Lock()
		cr.teardown()
		gpuMu.Unlock()
	}()
	// Inputs built on the device need the CPU's bytes at launch 0 only
	// (the check of the build): the CPU run then keeps no copy of later
	// launches' inputs.
	keepIns := 0
	if cr.devIn {
		keepIns = 1
	}
	st := time.Now()
	rep, err := cpu.Run(p, cpu.Options{Size: c.size, DType: c.dt, Seed: oracleSeed, Buffers: cpuBuffers, Reduce: c.red, Launches: c.launches, LLWidth: c.ll,
		OnLaunch: cr.launch, OnLaunchInputs: keepIns})
	res := caseResult{cpu: time.Since(st) - cr.gpuTime - cr.gpuWait, gpu: cr.gpuTime, wait: cr.gpuWait}
	var ge gpuError
	var h *HangError
	switch {
	case errors.As(err, &ge):
		res.err, res.hung = ge.err, errors.As(err, &h)
	case err != nil:
		res.skip = "the CPU executor refuses it: " + err.Error()
	case !rep.OK():
		// A racy or deadlocking plan has no single right answer.
		res.skip = "the CPU executor's verdict is " + rep.Verdict.String()
	case cr.first != nil:
		res.err = fmt.Errorf("%d launch·rank outputs differ; first: %w", cr.mismatches, cr.first)
	}
	return res
}

// gpuSide is what the cases of one plan share on the GPU: the executor,
// its stream and the device compare kernel.
type gpuSide struct {
	e      *Executor
	s      *cuda.Stream
	diff   *diffKernel
	tables map[*byte]cuda.DevicePtr // input tables on the device, by the host table
}

// openGPUSide opens p with opt and what its cases share; gpuMu is held.
func openGPUSide(p *ir.Plan, cases []gcase, opt Options) (*gpuSide, error) {
	e, err := Open(p, opt)
	if err != nil {
		return nil, err
	}
	g := &gpuSide{e: e, tables: map[*byte]cuda.DevicePtr{}}
	if g.s, err = cuda.NewStream(true); err == nil {
		g.diff, err = newDiffKernel(e, len(p.GPUs))
	}
	if err != nil {
		g.close()
		return nil, err
	}
	for _, c := range cases {
		if in, out, err := p.BufferBytes(c.size); err == nil {
			staging.plan(stageBytes(len(p.GPUs), in, outBytes(p, in, out)))
		}
	}
	return g, nil
}

// close frees what openGPUSide made; gpuMu is held.
func (g *gpuSide) close() {
	if g.diff != nil {
		g.diff.close()
	}
	for _, d := range g.tables {
		cuda.Free(d)
	}
	if g.s != nil {
		g.s.Destroy()
	}
	g.e.Close()
}

// checkCases runs every case of a plan concurrently (bounded by cpuSlots
// and cpuMem) and reports each failure.
func checkCases(t *testing.T, name string, p *ir.Plan, cases []gcase) {
	checkCasesWith(t, name, p, cases, Options{Timeout: 3 * time.Second})
}

// checkCasesWith is checkCases on an executor opened with opt.
func checkCasesWith(t *testing.T, name string, p *ir.Plan, cases []gcase, opt Options) {
	// Plans with port channels share the process with every other test's
	// executor and streams: their proxies copy in a context of their own
	// (proxy.go), so no count of streams against hardware queues matters.
	gpuMu.Lock()
	g, err := openGPUSide(p, cases, opt)
	gpuMu.Unlock()
	if err != nil && strings.Contains(err.Error(), "multicast") {
		t.Skipf("%s: %v", name, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer func() {
		gpuMu.Lock()
		g.close()
		gpuMu.Unlock()
	}()
	res := make([]caseResult, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = runCase(g, p, c)
		}()
	}
	wg.Wait()
	pass, skipped := 0, 0
	var cpuT, gpuT, waitT time.Duration
	for i, r := range res {
		cpuT += r.cpu
		gpuT += r.gpu
		waitT += r.wait
		switch {
		case r.err != nil:
			t.Errorf("%s %v: %v", name, cases[i], r.err)
		case r.skip != "":
			t.Logf("%s %v: skipped, %s", name, cases[i], r.skip)
			skipped++
		default:
			pass++
		}
	}
	t.Logf("%s: %d/%d cases bit-identical to the CPU executor, eager and graph (%d skipped; CPU %.1fs, GPU %.1fs, waiting %.1fs)",
		name, pass, len(cases), skipped, cpuT.Seconds(), gpuT.Seconds(), waitT.Seconds())
}
