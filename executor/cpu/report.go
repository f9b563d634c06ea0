package cpu

import (
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/ir"
)

// Options say what to run a plan on.
type Options struct {
	// Size is the message size as nccl-tests counts it: output bytes for
	// allgather, input bytes for every other collective.
	Size     int64
	DType    DType
	Reduce   ir.ReduceOp // "" means sum
	Launches int         // back-to-back launches to run and check; 0 means 2
	LLWidth  int         // LL packet width in bytes, 8 or 16; 0 means 16
	Seed     uint64
	Trace    bool      // build a Chrome trace-event JSON of the first launch
	Topology *Topology // cost model for the trace; nil means an H200 over NVLink
	// MaxSteps bounds the op executions of the whole run (fuzzing feeds
	// plans that would otherwise loop for minutes); 0 means 50 million
	// plus Launches times the plan's op count (a pipeline and each op of
	// its body counted once).
	MaxSteps int64
	// MaxMemory bounds the run's memory; 0 means 16 GiB. The simulated
	// buffers of all ranks together (a plan with a billion scratch chunks
	// is refused, not allocated) and the happens-before clocks' estimate
	// (ClockMemory) are each checked against it before the run
	// allocates them, and the heap during the run: past it, Run returns a
	// *MemoryError, never a verdict.
	MaxMemory int64
	// OnLaunch, when set, is called once every rank has finished a
	// launch, with that launch's inputs and the simulated outputs
	// ([rank] bytes, as in Report.Inputs/Outputs), after they were
	// checked. The report then keeps neither (its Inputs and Outputs
	// stay nil), so memory does not grow with Launches; the slices are
	// reused once OnLaunch returns. An error from it ends the run and is
	// returned by Run. Launches finished before a deadlock are still
	// checked and handed over.
	OnLaunch func(launch int, inputs, outputs [][]byte) error
	// OnLaunchInputs, when positive, hands OnLaunch the inputs of that
	// many first launches only: later launches get nil inputs, and Run
	// fills each rank's input buffer without keeping a copy of it (the
	// check reads the inputs from their recipe; a caller rebuilds them
	// with Input or InputPieces). 0 hands over every launch's inputs.
	OnLaunchInputs int
	// Buffers, when set, lends a streaming byte-level run (OnLaunch) its
	// large arrays and takes them back when Run returns (buffers.go).
	Buffers *Buffers
	// Symbolic proves the plan independently of the reduction and the
	// data type: inputs are fingerprints of (rank, launch, byte),
	// scratch and unwritten output start as poison, and every reduction
	// adds fingerprints whatever Reduce or the plan's reduce_op say. An
	// output equals the definition only if it holds every expected
	// contribution exactly once and nothing else (collision odds below
	// 2^-58 per comparison, docs/rationale.md), which implies correctness
	// under sum, min, max and prod in every type. DType is ignored;
	// Reduce is still validated. A plan whose ops name min, max or prod
	// explicitly is proven for its data flow only: it is right under
	// that reduction alone, which the byte-level run checks. Wrong
	// elements (8 bytes) are decoded into Mismatch.Terms/Explain and
	// Report.Findings. The run holds byte ranges (symrange.go) unless
	// PerElement or OnLaunch asks for one fingerprint per element.
	Symbolic bool
	// PerElement runs Symbolic the original way, one fingerprint per
	// element (symbolic.go): memory and time grow with the size. By
	// default a symbolic run holds runs of affine fingerprints over byte
	// ranges instead (symrange.go), whose cost grows with the ops and
	// which finds and words the same (the differential tests hold both
	// to it). Streaming (OnLaunch) and Inputs/Outputs need the
	// per-element mode: the range mode leaves Inputs and Outputs nil.
	PerElement bool
	// NoRaces skips the happens-before analysis: no clocks travel between
	// ranks and no access is checked for races, so the run finds wrong
	// results, clobbered inputs, deadlocks and unbalanced signals only.
	// It is for a second oracle beside a run of the same plan that does
	// check races (the verdict on races does not depend on the size or
	// the type: docs/rationale.md); it costs a fraction of a full run on
	// large plans, where the clocks are most of the work.
	NoRaces bool

	// Provenance follows data read from scratch bytes the launch had
	// not written (stale or poison) to the outputs it reaches, and names
	// that read in Finding.Reader (stale.go). It costs a writer map per
	// scratch array, so it is for placing the findings of a plan already
	// known to be wrong.
	Provenance bool

	// cons, when set, runs a consistency check instead of the result
	// check (consistency.go).
	cons *consMode

	// exactClocks runs on the exact clocks from the start (Run sets it
	// to repeat a run its sparse clocks could not decide).
	exactClocks bool

	// sched, when not zero, seeds a shuffled schedule (tests use it to
	// show that verdicts do not depend on the interleaving).
	sched uint64
}

// Verdict is the overall finding of a run.
type Verdict uint8

const (
	Correct Verdict = iota
	Deadlock
	Race
	Unbalanced
	WrongResult
)

var verdictNames = [...]string{"correct", "deadlock", "race", "unbalanced", "wrong result"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "invalid"
}

// Place names one op of a plan.
type Place struct {
	Rank, Block, Op int
	Inner           int // index in the pipeline body, or -1
	OpName          string
}

// Path is the op's JSON path in the plan.
func (p Place) Path() string {
	if p.Block < 0 {
		return fmt.Sprintf("gpus[%d] host (buffers between launches)", p.Rank)
	}
	s := fmt.Sprintf("gpus[%d].threadblocks[%d].ops[%d]", p.Rank, p.Block, p.Op)
	if p.Inner >= 0 {
		s += fmt.Sprintf(".ops[%d]", p.Inner)
	}
	return s
}

func (p Place) String() string {
	if p.Block < 0 {
		return p.Path()
	}
	return p.Path() + " (" + p.OpName + ")"
}

// Stuck is a block that can never proceed.
type Stuck struct {
	Place
	Waiting string // what it waits for: channel and peer, packet flag, semaphore, barrier
}

// Access is one side of a race.
type Access struct {
	Place
	Buffer     ir.BufferType
	BufferRank int
	Off, End   int64 // bytes of Buffer (packet bytes for packet accesses)
	Write      bool
}

func (a Access) String() string {
	rw := "reads"
	if a.Write {
		rw = "writes"
	}
	return fmt.Sprintf("%s %s rank %d %s[%d:%d]", a.Place, rw, a.BufferRank, a.Buffer.Long(), a.Off, a.End)
}

// RacePair is a pair of conflicting accesses the plan leaves unordered.
// Cause, when its Kind is not 0, is the step the plan is missing
// between them (cause.go).
type RacePair struct {
	A, B  Access
	Cause Cause
}

// UnbalancedSignal is a signal (or semaphore release) no wait consumed.
type UnbalancedSignal struct {
	Place
	Channel string // channel and peer, or semaphore
	Count   int    // tokens left over
}

// Mismatch is one wrong output element.
type Mismatch struct {
	Launch, Rank int
	Off          int64 // byte offset in the output buffer
	Got, Want    string
	Elem         int64 // element index in the output (Off / element size)
	Chunk        int   // output chunk holding the element
	// Writer is the op that last wrote the element before the end of
	// the launch (nil: no op ever wrote it); WriterLaunch is the launch
	// that op ran in (an earlier one: nothing wrote it in this launch).
	Writer       *Place
	WriterLaunch int
	// Terms is the decoded difference got − want (symbolic runs only;
	// nil when not decoded), Explain the same in words.
	Terms   []Term
	Explain string
}

// Term is one contribution an output element holds too often (Count > 0)
// or too rarely (Count < 0), decoded from a symbolic run's fingerprints.
type Term struct {
	Rank   int   // whose input (poison: whose buffer)
	Launch int   // which launch's input (poison: 0)
	Elem   int64 // element index in Rank's input (8-byte elements); poison: byte offset in the backing buffer
	Count  int
	// Poison: the term is bytes of Buffer that nobody wrote before they
	// were read (scratch offsets include the double-scratch half and the
	// packet encoding).
	Poison bool
	Buffer ir.BufferType
}

// Finding folds consecutive wrong elements of one output that share a
// writer and (in symbolic runs) the same explanation relative to the
// element: "rank 3's contribution to output elements 32–47 is missing".
type Finding struct {
	Launch, Rank int
	Off, End     int64 // bytes [Off, End) of the output buffer
	Elems        int   // wrong elements in the range (all of them)
	Writer       *Place
	WriterLaunch int
	// Reader, with Options.Provenance, is the op that read the finding's
	// first bytes from scratch this launch had not written yet (the
	// mistake, where Writer only passed the data on); nil otherwise.
	Reader  *Place
	Terms   []Term // the first element's difference (symbolic runs)
	Explain string
}

// InputClobber is a range of an out-of-place collective's input that was
// different at the end of a launch from what the host fed in: the
// collective must leave its input as it found it.
type InputClobber struct {
	Launch, Rank int
	Off, End     int64  // bytes [Off, End) of Rank's input that Writer wrote last
	Writer       *Place // the op that wrote them
}

func (c InputClobber) String() string {
	return fmt.Sprintf("launch %d: rank %d's input bytes [%d:%d) overwritten by %s", c.Launch, c.Rank, c.Off, c.End, c.Writer)
}

// maxMismatches caps Report.Wrong and Report.Clobbered; Report.WrongTotal
// counts every wrong element. maxFindings caps Report.Findings.
const (
	maxMismatches = 16
	maxFindings   = 64
)

// Report is everything a run found.
type Report struct {
	Verdict    Verdict
	Deadlocks  []Stuck
	Races      []RacePair
	Unbalanced []UnbalancedSignal
	Wrong      []Mismatch
	WrongTotal int // wrong elements over all launches and ranks
	// Findings fold the wrong elements into ranges with a writer and an
	// explanation (capped; symbolic runs decode at most a few thousand
	// elements, the rest fold as "not decoded").
	Findings []Finding
	// Clobbered lists input ranges an out-of-place collective changed,
	// each with the op that wrote it; ClobberedBytes counts the bytes of
	// all of them (ranges past the cap included). Either makes the verdict
	// WrongResult, in symbolic and byte-level runs alike.
	Clobbered      []InputClobber
	ClobberedBytes int64
	Inputs         [][][]byte // [launch][rank] inputs fed (nil with Options.OnLaunch)
	Outputs        [][][]byte // [launch][rank] outputs at the end of each launch (in place: the output bytes of the shared buffer; nil with Options.OnLaunch)
	Trace          []byte
	Steps          int64 // op executions simulated
}

// OK reports whether the plan is correct and clean.
func (r *Report) OK() bool {
	return r.Verdict == Correct && len(r.Races) == 0 && len(r.Deadlocks) == 0 && len(r.Unbalanced) == 0 && r.WrongTotal == 0 && r.ClobberedBytes == 0
}

func (r *Report) setVerdict() {
	switch {
	case len(r.Deadlocks) > 0:
		r.Verdict = Deadlock
	case len(r.Races) > 0:
		r.Verdict = Race
	case len(r.Unbalanced) > 0:
		r.Verdict = Unbalanced
	case r.WrongTotal > 0 || r.ClobberedBytes > 0:
		r.Verdict = WrongResult
	default:
		r.Verdict = Correct
	}
}

// String is the human report: the verdict, then every finding.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict: %s\n", r.Verdict)
	for _, s := range r.Deadlocks {
		fmt.Fprintf(&b, "deadlock: %s waits for %s\n", s.Place, s.Waiting)
	}
	for _, x := range r.Races {
		fmt.Fprintf(&b, "race: %s\n  and %s\n", x.A, x.B)
		if x.Cause.Kind != 0 {
			fmt.Fprintf(&b, "  fix: %s\n", x.Cause.Fix(planWhere))
		}
	}
	for _, u := range r.Unbalanced {
		fmt.Fprintf(&b, "unbalanced: %s: %d signal(s) on %s never waited for\n", u.Place, u.Count, u.Channel)
	}
	for _, m := range r.Wrong {
		fmt.Fprintf(&b, "wrong result: launch %d rank %d output[%d]: got %s, want %s\n", m.Launch, m.Rank, m.Off, m.Got, m.Want)
		// A finding below words the element's range at once.
		if m.Explain != "" && !r.folded(m) {
			fmt.Fprintf(&b, "  %s\n", m.Explain)
		}
	}
	if n := r.WrongTotal - len(r.Wrong); n > 0 {
		fmt.Fprintf(&b, "wrong result: %d more wrong elements\n", n)
	}
	// Findings repeat the elements above folded into ranges; print them
	// only where they say more (symbolic explanations).
	for _, f := range r.Findings {
		if f.Terms == nil {
			continue
		}
		w := "no op wrote them"
		if f.Writer != nil {
			w = "last written by " + f.Writer.String()
		}
		fmt.Fprintf(&b, "finding: launch %d rank %d output[%d:%d] (%d elements, %s): %s\n", f.Launch, f.Rank, f.Off, f.End, f.Elems, w, f.Explain)
	}
	for _, c := range r.Clobbered {
		fmt.Fprintf(&b, "input overwritten: %s\n", c)
	}
	if n := r.ClobberedBytes; n > 0 && len(r.Clobbered) >= maxMismatches {
		fmt.Fprintf(&b, "input overwritten: %d bytes in all\n", n)
	}
	return b.String()
}

// folded reports whether a symbolic finding covers m (and says its
// explanation for the whole range).
func (r *Report) folded(m Mismatch) bool {
	for _, f := range r.Findings {
		if f.Terms != nil && f.Launch == m.Launch && f.Rank == m.Rank && f.Off <= m.Off && m.Off < f.End {
			return true
		}
	}
	return false
}
