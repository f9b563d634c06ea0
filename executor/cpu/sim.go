package cpu

import (
	"errors"
	"fmt"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// sim is one run of a plan.
type sim struct {
	p          *ir.Plan
	opt        Options
	red        ir.ReduceOp
	in, out    int64
	ranks      []*rankState
	blocks     []*block
	agents     int
	opPlaces   int32   // places of ops (setup.go: addPlace, place)
	hostPlaces []Place // the hosts' places, numbered after the ops'
	slab       refSlab // resolved ops' references and channels
	det        detector
	rd         reducer
	tmp        []byte
	tags       tagSource
	tmpClk     clocks
	opClk      clocks
	none       clocks // empty, what NoRaces sends instead of a block's clocks
	exec       uint64
	steps      int64
	maxSteps   int64
	launches   int
	report     *Report
	lost       []UnbalancedSignal
	tr         *tracer
	stream     streamer
	expArena   []byte
	rec        recipe       // checkFast's view of a launch's inputs (recipe.go)
	lanes      []byte       // checkFast's reduced values, one byte per element
	exp        []byte       // checkFast's expected bytes of one piece
	enc        *[256]uint32 // checkFast's lane-to-element encoding
	sym        *symState    // writers and explanation state (symbolic.go, writers.go)
	field      *field       // the range mode's arithmetic (symrange.go); nil in the other modes
	vout       [][]vdata    // range mode: [launch][rank] outputs at the end of each launch
}

// block is one thread block of one rank, run as a state machine.
type block struct {
	agent, rank, tb int
	plan            *ir.ThreadBlock
	tab             *tbTable
	first           int32   // place of the block's first op
	offs            []int32 // place of op i is first+offs[i]; nil: first+i
	cur             rop     // the op at (curPC, curInner), resolved
	curPC, curInner int     // curPC -1: none
	hdrPC           int     // the pipeline whose iters and unit are cached; -1: none
	iters, unit     int64
	slab            refSlab // cur's references and channels
	pc              int
	iter            int64
	inner           int
	launch          int
	launchDone      bool
	clk, pend       clocks
	ph              uint32 // epoch of the op running now; one per op execution
	waiting         string
	inBarrier       bool
	barGen          int
	t               float64
}

// Run simulates opt.Launches back-to-back launches of p and checks them.
// The error is for runs that cannot start (a size the plan cannot split,
// an unsupported type or reduction, a reference that does not resolve) or
// that exceed opt.MaxSteps; every finding about the plan is in the Report.
// The error carries a code (ir.ErrorCode): exec.options for an option
// out of range, exec.size for a size whose pieces are not whole
// elements, proof.cannot-run for the rest.
func Run(p *ir.Plan, opt Options) (*Report, error) {
	rep, err := run(p, opt)
	if err != nil {
		return nil, diag.WithCode(diag.CodeCannotRun, err)
	}
	return rep, nil
}

func run(p *ir.Plan, opt Options) (*Report, error) {
	if p == nil {
		return nil, fmt.Errorf("no plan")
	}
	rep, err := runMode(p, opt)
	if errors.Is(err, errClockMiss) {
		// The sparse clocks left an access unordered: the exact clocks
		// say whether it races (sparseclock.go).
		opt.exactClocks = true
		rep, err = runMode(p, opt)
	}
	return rep, err
}

func runMode(p *ir.Plan, opt Options) (*Report, error) {
	if opt.Symbolic && !opt.PerElement && opt.OnLaunch == nil {
		return runRanges(p, opt)
	}
	s := &sim{p: p, opt: opt}
	return s.start()
}

// sparse reports whether the run starts on sparse clocks: it can be
// repeated should they leave an access unordered (nothing streamed
// out), or it checks no races at all (NoRaces: its clocks only carry
// its blocks' own entries, which cost less on sparse clocks).
func (s *sim) sparse() bool {
	return !s.opt.exactClocks && (s.opt.NoRaces || s.opt.OnLaunch == nil)
}

// clockMiss reports whether the sparse clocks left an access unordered.
func (s *sim) clockMiss() bool { return s.tags.sp != nil && s.tags.sp.miss }

// start is Run once the mode is chosen (s.field set: the range mode).
func (s *sim) start() (*Report, error) {
	opt := s.opt
	if err := s.options(); err != nil {
		return nil, diag.WithCode(diag.CodeBadOptions, err)
	}
	// Before setup, which resolves every op of every block: at 512 ranks
	// that alone held 2.5 GB before the clocks' refusal came.
	if err := s.checkClockMemory(); err != nil {
		return nil, err
	}
	if err := s.setup(); err != nil {
		return nil, err
	}
	if err := s.checkSizes(); err != nil {
		return nil, err
	}
	if opt.Symbolic && s.field == nil {
		s.poison() // the range mode's arrays start as poison (setupRanges)
	}
	s.report = &Report{}
	s.det = detector{mem: make([][numArrs]shadow, len(s.ranks)), seen: map[raceKey]int{}, s: s}
	if s.sparse() {
		s.tags.sp = newSparseRun(s)
	}
	s.tmpClk = newClocks(s.agents, &s.tags)
	s.opClk = newClocks(s.agents, &s.tags)
	s.none = newClocks(s.agents, &s.tags).frozen()
	for _, rs := range s.ranks {
		rs.proxyClk = newClocks(s.agents, &s.tags)
		rs.hostClk = newClocks(s.agents, &s.tags)
		for _, b := range rs.blocks {
			b.clk, b.pend = newClocks(s.agents, &s.tags), newClocks(s.agents, &s.tags)
		}
	}
	if opt.Trace {
		s.tr = newTracer(s)
	}
	s.report.Inputs = make([][][]byte, s.launches)
	s.report.Outputs = make([][][]byte, s.launches)
	for l := range s.launches {
		s.report.Inputs[l] = make([][]byte, len(s.ranks))
		s.report.Outputs[l] = make([][]byte, len(s.ranks))
	}
	s.stream = streamer{on: opt.OnLaunch, done: make([]int, s.launches), pool: opt.Buffers}
	defer s.recycle()
	hostPlace := make([]int32, len(s.ranks))
	for r, rs := range s.ranks {
		hostPlace[r] = s.addPlace(Place{Rank: r, Block: -1, Op: -1, Inner: -1, OpName: "host"})
		s.boundary(rs, -1, hostPlace[r])
	}
	if err := s.schedule(hostPlace); err != nil {
		return nil, err
	}
	if s.clockMiss() {
		return nil, errClockMiss
	}
	s.finish()
	return s.report, nil
}

func (s *sim) options() error {
	o := &s.opt
	if o.Symbolic {
		o.DType = symType
	}
	if !validType(o.DType) {
		return fmt.Errorf("unsupported data type %d", o.DType)
	}
	// The plan may fix its reduction (reduce_op min, max or prod): no
	// reduction asked means that one, another one is refused.
	red, err := s.p.RunReduce(o.Reduce)
	if err != nil {
		return err
	}
	switch red {
	case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax:
		s.red = red
	case ir.ReduceProd:
		if o.DType.IsFloat() {
			return fmt.Errorf("reduction prod is supported for integer types only, not %s", o.DType)
		}
		s.red = red
	default:
		return fmt.Errorf("unknown reduction %q (want sum, min, max or prod)", o.Reduce)
	}
	s.launches = o.Launches
	if s.launches == 0 {
		s.launches = 2
	}
	if s.launches < 1 || s.launches > 64 {
		return fmt.Errorf("launches must be between 1 and 64, got %d", o.Launches)
	}
	if o.LLWidth == 0 {
		o.LLWidth = 16
	}
	if o.LLWidth != 8 && o.LLWidth != 16 {
		return fmt.Errorf("LL packet width must be 8 or 16 bytes, got %d", o.LLWidth)
	}
	s.maxSteps = o.MaxSteps
	if s.maxSteps <= 0 {
		// Every op of the plan once per launch, and room for pipelines
		// to loop: a 1024-rank ring runs 54 million ops in 4 launches.
		ops, _ := planOps(s.p)
		s.maxSteps = 50_000_000 + int64(s.launches)*ops
	}
	return nil
}

// boundary ends launch l of a rank (l = -1: before the first): the
// kernel's end orders everything its blocks did, then the host reads the
// outputs and writes the next inputs, then the next launch starts.
func (s *sim) boundary(rs *rankState, l int, place int32) {
	j := rs.hostClk
	rs.hostEpoch++
	switch {
	case s.opt.NoRaces:
	case s.tags.sp != nil:
		s.sparseBoundary(rs, j)
	default:
		for _, b := range rs.blocks {
			// The kernel's end is a nop for every block: what each
			// acquired reaches the host.
			j.join(b.clk)
			j.join(b.pend)
			// It also fences the rank's own blocks, so their writes
			// become visible to the host. Another rank's write the
			// blocks only know through relaxed edges (E) stays
			// invisible: that rank publishes it at its own kernel's end
			// (acc.pubEpoch), which the host here is not ordered after
			// (docs/model.md: relaxed pairs never make data readable,
			// and the host reads outputs when its own kernel ends).
			j.set(b.agent, b.ph)
		}
		j.set(rs.host, rs.hostEpoch)
	}
	s.exec++
	a := acc{agent: int32(rs.host), epoch: rs.hostEpoch, exec: s.exec, place: place, pubAgent: int32(rs.host), pubEpoch: rs.hostEpoch}
	if l >= 0 {
		a.typ, a.base = ir.BufOutput, rs.outBase
		s.det.access(rs.r, rs.outArr, rs.outBase, rs.outBase+s.out, a, j)
		if s.field != nil {
			s.vout[l][rs.r] = rs.vm[rs.outArr].get(s.field, rs.outBase, rs.outBase+s.out, nil)
		} else {
			o := s.stream.buf(s.out)
			copy(o, rs.arrs[rs.outArr][rs.outBase:])
			s.report.Outputs[l][rs.r] = o
		}
		s.endLaunch(rs, l)
		s.launchDone(l)
	}
	next := l + 1
	rs.launch = next
	if next < s.launches && s.field != nil {
		rs.vm[rs.inArr].set(s.field, rs.inBase, s.inputRuns(rs.r, next))
	} else if next < s.launches {
		arr := rs.arrs[rs.inArr][rs.inBase : rs.inBase+s.in]
		s.fillLaunch(next, rs.r, arr)
		if s.keepsInputs(next) {
			in := s.stream.buf(s.in)
			copy(in, arr)
			s.report.Inputs[next][rs.r] = in
		}
	}
	if next < s.launches {
		a.typ, a.base, a.write = ir.BufInput, rs.inBase, true
		s.det.access(rs.r, rs.inArr, rs.inBase, rs.inBase+s.in, a, j)
	}
	rs.done = 0
	tEnd := 0.0
	for _, b := range rs.blocks {
		tEnd = max(tEnd, b.t)
	}
	for _, b := range rs.blocks {
		switch {
		case s.opt.NoRaces:
		case s.tags.sp != nil:
			s.sparseStart(rs, b)
		default:
			b.clk.assign(j)
		}
		b.pend.clear()
		b.ph++
		b.pc, b.iter, b.inner = 0, 0, 0
		b.launch = next
		b.launchDone = next >= s.launches
		b.t = tEnd
	}
}

// schedule runs blocks round-robin, each until it blocks, until all are
// finished or none can move (deadlock).
func (s *sim) schedule(hostPlace []int32) error {
	order := append([]*block(nil), s.blocks...)
	rnd := s.opt.sched
	for {
		progress := false
		burst := int64(1 << 62)
		if rnd != 0 {
			// Shuffled order and short bursts: another legal interleaving.
			for i := len(order) - 1; i > 0; i-- {
				j := int(splitmix(&rnd) % uint64(i+1))
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, b := range order {
			if rnd != 0 {
				burst = int64(splitmix(&rnd)%3) + 1
			}
			for n := int64(0); !b.launchDone && n < burst; n++ {
				ok := s.step(b)
				if s.clockMiss() {
					return errClockMiss
				}
				if !ok {
					break
				}
				progress = true
				if s.stream.err != nil {
					return s.stream.err
				}
				if s.steps > s.maxSteps {
					return fmt.Errorf("simulation stopped after %d op executions (MaxSteps); the plan may loop far longer than intended", s.steps)
				}
				if s.steps%heapCheckSteps == 0 {
					if err := s.checkHeap(); err != nil {
						return err
					}
				}
			}
		}
		for _, rs := range s.ranks {
			if rs.launch < s.launches && rs.done == len(rs.blocks) {
				s.boundary(rs, rs.launch, hostPlace[rs.r])
				if s.clockMiss() {
					return errClockMiss
				}
				progress = true
				if s.stream.err != nil {
					return s.stream.err
				}
			}
		}
		all := true
		for _, rs := range s.ranks {
			if rs.launch < s.launches {
				all = false
			}
		}
		if all {
			return nil
		}
		if !progress {
			for _, b := range s.blocks {
				if b.launchDone {
					continue
				}
				op, _, _ := s.current(b)
				pl := s.place(op.place)
				why := b.waiting
				if why == "" && (op.code == ir.OpWait || op.code == ir.OpRlxWait) {
					why = s.waitMsg(b, op)
				}
				s.report.Deadlocks = append(s.report.Deadlocks, Stuck{Place: pl, Waiting: fmt.Sprintf("%s (launch %d)", why, b.launch)})
			}
			return nil
		}
	}
}

// current is the op the block runs next with its pipeline window.
func (s *sim) current(b *block) (*rop, int64, int64) {
	ops := b.plan.Ops
	for b.pc < len(ops) {
		op := &ops[b.pc]
		if op.Code != ir.OpPipeline {
			return s.resolved(b, -1), 0, 1 << 62
		}
		s.pipeline(b)
		if b.iter < b.iters && len(op.Ops()) > 0 {
			return s.resolved(b, b.inner), b.iter * b.unit, b.unit
		}
		b.pc++
		b.iter, b.inner = 0, 0
	}
	return nil, 0, 0
}

func (s *sim) advance(b *block) {
	op := &b.plan.Ops[b.pc]
	if op.Code == ir.OpPipeline {
		b.inner++
		if b.inner < len(op.Ops()) {
			return
		}
		b.inner = 0
		b.iter++
		if s.pipeline(b); b.iter < b.iters {
			return
		}
		b.iter = 0
	}
	b.pc++
}

// pipeline caches the iterations and window of the pipeline at b.pc
// (setup checked them).
func (s *sim) pipeline(b *block) {
	if b.hdrPC == b.pc {
		return
	}
	it := b.plan.Ops[b.pc].Iter()
	b.hdrPC, b.unit, b.iters = b.pc, int64(it.UnitSize), s.ranks[b.rank].lay.PipelineIters(it)
}

// resolved is the block's op at pc (inner: in the pipeline there, or
// -1), resolved as setup resolved it, once per visit: a blocked op is
// retried from its cache.
func (s *sim) resolved(b *block, inner int) *rop {
	if b.curPC == b.pc && b.curInner == inner {
		return &b.cur
	}
	op := &b.plan.Ops[b.pc]
	place := b.first + int32(b.pc)
	if b.offs != nil {
		place = b.first + b.offs[b.pc]
	}
	pl := Place{Rank: b.rank, Block: b.tb, Op: b.pc, Inner: inner, OpName: op.Code.String()}
	if inner >= 0 {
		op = &op.Ops()[inner]
		place += 1 + int32(inner)
		pl.OpName = op.Code.String()
	}
	b.slab.reset()
	ro, err := s.resolveOp(b.rank, b.tab, b.plan, op, pl, place, &b.slab)
	if err != nil {
		// Setup resolved the same op of the same plan without error.
		panic(fmt.Sprintf("cpu: %s resolved at setup but not now: %v", pl.Path(), err))
	}
	b.cur, b.curPC, b.curInner = ro, b.pc, inner
	return &b.cur
}

// step runs the block's next op; false means it is blocked.
func (s *sim) step(b *block) bool {
	op, w, unit := s.current(b)
	if op == nil {
		b.launchDone = true
		s.ranks[b.rank].done++
		return true
	}
	t0 := b.t
	s.exec++
	b.ph++
	ok, msg := s.run(b, op, w, unit)
	if !ok {
		b.waiting = msg
		return false
	}
	if s.tr != nil && b.launch != 0 {
		s.tr.starts, s.tr.ends = s.tr.starts[:0], s.tr.ends[:0]
	}
	s.steps++
	b.waiting = ""
	if s.tr != nil && b.launch == 0 {
		s.tr.slice(b, op, t0, w)
	}
	s.advance(b)
	return true
}

// own returns the block's clocks including what it has acquired but not
// yet spread through the block: what a signal or release publishes.
func (s *sim) own(b *block, relaxed bool) clocks {
	if s.opt.NoRaces {
		return s.none // nothing travels: no race is checked
	}
	// Usually nothing is pending (a nop came since the last wait): the
	// snapshot is then the block's clocks themselves.
	if relaxed {
		if b.pend.E.empty() {
			return clocks{E: b.clk.E.frozen()}
		}
		c := b.clk.E.clone()
		join(c, b.pend.E)
		c.freeze() // nothing else holds c: freeze it in place
		return clocks{E: c}
	}
	if b.pend.E.empty() && b.pend.V.empty() {
		return b.clk.frozen()
	}
	c := clocks{E: b.clk.E.clone(), V: b.clk.V.clone()}
	c.join(b.pend)
	c.E.freeze()
	c.V.freeze()
	return c
}

// nop spreads what the block acquired to all its threads and starts a new
// phase: ops after it are ordered after every op before it.
func (b *block) nop() {
	b.clk.join(b.pend)
	b.pend.clear()
	b.clk.set(b.agent, b.ph)
}

// proxyStep hands a request to the rank's in-order proxy.
func (s *sim) proxyStep(rs *rankState, b *block) {
	rs.proxyClk.recv(b.clk)
	rs.proxyEpoch++
	rs.proxyClk.set(rs.proxy, rs.proxyEpoch)
	rs.proxyT = max(rs.proxyT, b.t)
}

func (s *sim) chanName(rs *rankState, c rchan) string {
	e := &rs.chans[ir.ChanSlot(c.typ)][c.flat]
	return fmt.Sprintf("%s channel %d of rank %d (peer rank %d)", c.typ, c.flat, rs.r, e.peer)
}

func (s *sim) signal(b *block, op *rop, c rchan, relaxed bool) {
	rs := s.ranks[b.rank]
	e := &rs.chans[ir.ChanSlot(c.typ)][c.flat]
	var tk token
	if c.typ == ir.ChanPort {
		s.proxyStep(rs, b)
		rs.proxyT += s.topo().PortLatencyUs
		tk = token{c: s.none, t: rs.proxyT}
		if !s.opt.NoRaces {
			tk.c = rs.proxyClk.frozen()
		}
	} else {
		tk = token{c: s.own(b, relaxed), t: b.t + s.topo().SignalLatencyUs}
	}
	tk.place = op.place
	tk.flow = s.tr.send(b)
	if e.partner < 0 || e.peer < 0 || e.peer >= len(s.ranks) {
		s.lost = append(s.lost, UnbalancedSignal{Place: s.place(op.place), Channel: s.chanName(rs, c) + ", which has no paired channel", Count: 1})
		return
	}
	s.ranks[e.peer].chans[ir.ChanSlot(c.typ)][e.partner].in.push(tk)
}

// unsignalled returns the first channel of a wait that lacks a signal
// and how many the wait needs from it; need is 0 when none lacks one.
func (s *sim) unsignalled(rs *rankState, op *rop) (c rchan, need int) {
	for i, c := range op.chans {
		need := 1
		for _, d := range op.chans[:i] {
			if d == c {
				need++
			}
		}
		if rs.chans[ir.ChanSlot(c.typ)][c.flat].in.len() < need {
			return c, need
		}
	}
	return rchan{}, 0
}

// waitMsg says what a blocked wait waits for. It is built only for a
// deadlock report (schedule): a blocked wait is retried every round, and
// formatting each retry cost a tenth of a 128-rank proof.
func (s *sim) waitMsg(b *block, op *rop) string {
	rs := s.ranks[b.rank]
	c, need := s.unsignalled(rs, op)
	e := &rs.chans[ir.ChanSlot(c.typ)][c.flat]
	return fmt.Sprintf("signal #%d on %s; the peer has sent %d", e.got+need, s.chanName(rs, c), e.got+e.in.len())
}

func (s *sim) wait(b *block, op *rop, relaxed bool) (bool, string) {
	rs := s.ranks[b.rank]
	if _, need := s.unsignalled(rs, op); need > 0 {
		return false, "" // waitMsg says why, should it come to a deadlock
	}
	for _, c := range op.chans {
		e := &rs.chans[ir.ChanSlot(c.typ)][c.flat]
		e.got++
		tk := e.in.pop()
		s.tr.recv(tk)
		// Relaxed memory-channel waits order execution only; port waits
		// always acquire (upstream has no relaxed port wait).
		if tk.c.V != nil && (!relaxed || c.typ == ir.ChanPort) {
			b.pend.recv(tk.c)
		} else {
			recvE(b.pend.E, tk.c.E)
		}
		b.t = max(b.t, tk.t)
	}
	return true, ""
}

// run executes one op; false with a reason when it must wait.
func (s *sim) run(b *block, op *rop, w, unit int64) (bool, string) {
	rs := s.ranks[b.rank]
	topo := s.topo()
	switch op.code {
	case ir.OpNop:
		b.nop()
		b.t += topo.OpLatencyUs / 4
	case ir.OpBarrier:
		return s.barrier(b, op)
	case ir.OpSignal, ir.OpRlxSignal:
		for _, c := range op.chans {
			s.signal(b, op, c, op.code == ir.OpRlxSignal)
		}
		b.t += topo.OpLatencyUs / 4
	case ir.OpWait, ir.OpRlxWait:
		return s.wait(b, op, op.code == ir.OpRlxWait)
	case ir.OpFlush:
		b.pend.recv(rs.proxyClk)
		b.t = max(b.t, rs.proxyT)
	case ir.OpSemAcquire:
		for _, id := range op.sems {
			if rs.sems[id].value() == 0 {
				return false, fmt.Sprintf("semaphore %d of rank %d (value 0)", id, rs.r)
			}
		}
		for _, id := range op.sems {
			sm := &rs.sems[id]
			if sm.free > 0 {
				sm.free--
				continue
			}
			tk := sm.q.pop()
			s.tr.recv(tk)
			b.pend.recv(tk.c)
			b.t = max(b.t, tk.t)
		}
	case ir.OpSemRelease:
		for _, id := range op.sems {
			sm := &rs.sems[id]
			sm.q.push(token{c: s.own(b, false), place: op.place, t: b.t, flow: s.tr.send(b)})
		}
	default:
		return s.data(b, op, w, unit)
	}
	return true, ""
}

func (s *sim) barrier(b *block, op *rop) (bool, string) {
	rs := s.ranks[b.rank]
	st := rs.barriers[op.barrierID]
	if st == nil {
		st = &barrier{acc: newClocks(s.agents, &s.tags), results: map[int]barrierResult{}}
		rs.barriers[op.barrierID] = st
	}
	if !b.inBarrier {
		b.inBarrier, b.barGen = true, st.gen
		st.acc.recv(b.clk)
		st.acc.recv(b.pend)
		st.acc.set(b.agent, b.ph)
		st.t = max(st.t, b.t)
		st.arrived++
		if st.arrived >= op.numTBs {
			st.results[st.gen] = barrierResult{c: st.acc, t: st.t, pending: st.arrived}
			st.gen++
			st.acc, st.arrived, st.t = newClocks(s.agents, &s.tags), 0, 0
		}
	}
	if st.gen <= b.barGen {
		return false, fmt.Sprintf("barrier %d of rank %d (%d of %d blocks arrived)", op.barrierID, rs.r, st.arrived, op.numTBs)
	}
	res := st.results[b.barGen]
	b.inBarrier = false
	b.pend.join(res.c)
	b.nop()
	b.t = max(b.t, res.t) + s.topo().SignalLatencyUs
	if res.pending--; res.pending <= 0 {
		delete(st.results, b.barGen)
	} else {
		st.results[b.barGen] = res
	}
	return true, ""
}

// finish checks balance and results once the run is over.
func (s *sim) finish() {
	r := s.report
	r.Races = s.det.races
	r.Steps = s.steps
	if len(r.Deadlocks) == 0 {
		r.Unbalanced = append(r.Unbalanced, s.lost...)
		for _, rs := range s.ranks {
			for slot := range rs.chans {
				for j := range rs.chans[slot] {
					q := &rs.chans[slot][j].in
					if q.len() > 0 {
						tk := q.front()
						src := s.place(tk.place)
						r.Unbalanced = append(r.Unbalanced, UnbalancedSignal{Place: src,
							Channel: fmt.Sprintf("%s channel %d of rank %d (from rank %d)", []ir.ChannelType{ir.ChanMemory, ir.ChanPort}[slot], j, rs.r, src.Rank), Count: q.len()})
					}
				}
			}
			for id := range rs.sems {
				sm := &rs.sems[id]
				if v := sm.value(); v != sm.init {
					pl := Place{Rank: rs.r, Block: -1, Op: -1, Inner: -1, OpName: "sem_release"}
					if sm.q.len() > 0 {
						pl = s.place(sm.q.front().place)
					}
					r.Unbalanced = append(r.Unbalanced, UnbalancedSignal{Place: pl,
						Channel: fmt.Sprintf("semaphore %d of rank %d (ends at %d, starts at %d)", id, rs.r, v, sm.init), Count: v - sm.init})
				}
			}
		}
		s.check()
	}
	if s.tr != nil {
		r.Trace = s.tr.json()
	}
	r.setVerdict()
}
