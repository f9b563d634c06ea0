package compiler

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// FuzzProof is the differential fuzzer of the proof: it takes a plan (a
// library algorithm compiled at 2–9 ranks, a fixture of
// testdata/peer-plans, or a random chunk-level program of 2–4 ranks from
// TestDifferential's generator: any collective, LL, double scratch),
// applies the plan-level mutations its input encodes (proofMutate: drop
// or add a nop, drop, move or duplicate a signal, wait or flush, swap
// relaxed and release sync, move a chunk index, wrap an op in a
// pipeline, toggle double scratch, fix a reduction), and runs the result
// at an admitted size with 1–5 launches once symbolically and once at
// byte level per type and reduction. It fails when the two disagree in
// the ways TestDifferential forbids (diffOne): a symbolically proven plan
// must be correct at byte level in every type and reduction it serves,
// which includes changing no input byte of an out-of-place collective
// (both runs report clobbered inputs); deadlocks, races and unbalanced
// signals are found by both modes or neither; a symbolic wrong result
// must be wrong at byte level unless a documented blind spot explains
// it; and the range and per-element symbolic modes must agree. A proven
// plan claimed rank-consistent must also give every rank the same bits
// on random floats (consistentBits).
//
// Each input is one plan at one size (a few milliseconds to a second at
// nine ranks), so `go test -fuzz FuzzProof` explores many.
func FuzzProof(f *testing.F) {
	srcs := proofSources(f)
	for _, in := range proofSeeds(srcs) {
		f.Add(in.which, in.sizeSel, in.launches, in.data)
	}
	f.Fuzz(func(t *testing.T, which uint16, sizeSel, launches uint8, data []byte) {
		c, ok := proofInput{which, sizeSel, launches, data}.prepare(srcs)
		if !ok {
			return
		}
		what := c.source + ", mutated: " + c.mutation
		reds := proofReductions(c.p)
		diffOne(t, &diffStats{}, c.p, what, c.size, c.launches, reds)
		if c.sym.OK() && len(reds) == len(diffReduces) {
			consistentBits(t, what, c.p, c.size, c.launches)
		}
	})
}

// A proofInput is one input of FuzzProof: which source plan, an index
// into the sizes its rule admits, a launch count and the mutations.
type proofInput struct {
	which             uint16
	sizeSel, launches uint8
	data              []byte
}

// proofSeeds are FuzzProof's seeds: a sample of the sources (each
// algorithm at some rank count, a few fixtures), each unmutated and with
// one mutation, the kinds in turn. The seeds must take a few seconds, as
// CI fuzzes each target for 10 s including them, and the fuzzer reaches
// the other sources by mutating which. Inputs past the source plans
// compile a random chunk-level program (TestDifferential's generator,
// seeded by which) instead.
func proofSeeds(srcs []*proofSource) []proofInput {
	var out []proofInput
	for i, k := 0, 0; i < len(srcs); i, k = i+9, k+1 {
		kind := byte(k % numProofMutations)
		out = append(out, proofInput{uint16(i), uint8(i), uint8(i%3 + 1), []byte{}})
		out = append(out, proofInput{uint16(i), uint8(3*i + int(kind)), uint8(kind%5 + 1), []byte{kind, byte(i), byte(3 * kind), byte(5*i + int(kind)), 0x41}})
	}
	for k := 0; k < 4; k++ {
		out = append(out, proofInput{uint16(len(srcs) + k), uint8(k), uint8(k % 5), []byte{byte(k), 0, 0, byte(k), 0x41}})
	}
	return out
}

// A proofCase is what one input runs: the mutated plan at one admitted
// size and launch count, and its symbolic verdict there.
type proofCase struct {
	p                *ir.Plan
	source, mutation string
	size             int64
	launches         int
	sym              *cpu.Report
}

// prepare builds in's case from srcs; ok is false when the input makes
// none (a program that does not compile, a mutation the decoder would
// refuse, no admitted size, too large, or refused at setup).
func (in proofInput) prepare(srcs []*proofSource) (c proofCase, ok bool) {
	var base *ir.Plan
	if k := int(in.which) % (len(srcs) + 64); k < len(srcs) {
		base, c.source = srcs[k].plan(), srcs[k].name
	} else {
		prog := genProgram(rand.New(rand.NewSource(int64(in.which))))
		p, _, ds := CompileSource("gen.msccl", []byte(prog), nil, Options{})
		if ds.HasErrors() {
			return c, false
		}
		base, c.source = p, "generated program:\n"+prog
	}
	if base == nil {
		return c, false
	}
	c.p, c.mutation = proofMutate(base, in.data)
	if c.p == nil {
		return c, false
	}
	if ds := ir.Validate(c.p); ds.HasErrors() {
		return c, false // the decoder refuses it before any executor runs it
	}
	rule, err := c.p.SizeRule()
	if err != nil {
		return c, false
	}
	if c.size, ok = rule.Next(rule.Min + int64(in.sizeSel%8)*rule.Granularity); !ok {
		return c, false
	}
	n, _, err := c.p.BufferBytes(c.size)
	if err != nil || n*int64(len(c.p.GPUs)) > 4<<20 {
		return c, false // keep each input fast
	}
	c.launches = 1 + int(in.launches%5)
	// Bounded: a mutation can make a plan loop (a pipeline of tiny
	// windows) or ask for huge scratch; the byte-level runs that follow
	// move the same ops and bytes as this one.
	c.sym, err = cpu.Run(c.p, cpu.Options{Size: c.size, Symbolic: true, Launches: c.launches, MaxSteps: 2_000_000, MaxMemory: 1 << 30})
	if err != nil {
		return c, false // refused at setup (a mutated index past a buffer) or too large: not a verdict
	}
	return c, true
}

// consistentBits holds the rank-consistency claim of a plan proven at
// size (symbolically, over launches) to random floats in the direction
// that must never fail: a plan claimed rank-consistent gives every rank
// the same bits. (A plan claimed not may still round alike, e.g. when
// its trees differ only in how f32 ops nest.) Both run at size only: a
// mutated plan proven there may deadlock at another (a signal in a
// pipeline signals once per window).
func consistentBits(t *testing.T, what string, p *ir.Plan, size int64, launches int) {
	t.Helper()
	c, err := cpu.CheckConsistency(p, []int64{size}, launches)
	if err != nil || !c.Identical {
		return
	}
	for _, dt := range []cpu.DType{cpu.F32, cpu.BF16} {
		got, err := cpu.CompareFloats(p, size, dt, launches, 9)
		if err != nil {
			t.Fatalf("%s: CompareFloats %s at %d bytes: %v", what, dt, size, err)
		}
		if !got.Identical {
			t.Fatalf("%s: claimed rank-consistent, but on random %s at %d bytes %s", what, dt, size, got.Pair())
		}
	}
}

// A proofSource is one plan the fuzzer starts from, compiled or decoded
// once per process.
type proofSource struct {
	name string
	once sync.Once
	p    *ir.Plan
	load func() *ir.Plan
}

func (s *proofSource) plan() *ir.Plan {
	s.once.Do(func() { s.p = s.load() })
	return s.p
}

// proofSources lists every library algorithm at 2–9 ranks (hierarchical
// ones at 2 nodes) and every peer-plan fixture, in a fixed order so that
// a corpus entry names the same plan on every machine.
func proofSources(f testing.TB) []*proofSource {
	files, _ := filepath.Glob("../algorithms/*.msccl")
	sort.Strings(files)
	var out []*proofSource
	for _, file := range files {
		for n := int64(2); n <= 9; n++ {
			defs := map[string]int64{"ranks": n}
			if strings.Contains(file, "hierarchical") {
				if n%2 != 0 {
					continue
				}
				defs["nodes"], defs["gpus_per_node"] = 2, n/2
			}
			file := file
			out = append(out, &proofSource{name: fmt.Sprintf("%s@%d", filepath.Base(file), n), load: func() *ir.Plan {
				b, err := os.ReadFile(file)
				if err != nil {
					return nil
				}
				p, _, ds := CompileSource(filepath.Base(file), b, defs, Options{})
				if ds.HasErrors() {
					return nil // the algorithm refuses this rank count
				}
				return p
			}})
		}
	}
	fixtures, _ := filepath.Glob("../testdata/peer-plans/*.json")
	sort.Strings(fixtures)
	for _, path := range fixtures {
		path := path
		out = append(out, &proofSource{name: filepath.Base(path), load: func() *ir.Plan {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			p, ds := ir.Decode(b)
			if ds.HasErrors() {
				return nil
			}
			return p
		}})
	}
	if len(out) == 0 {
		f.Fatal("no source plans: run from the compiler directory")
	}
	return out
}

// proofReductions are the reductions a plan is compared under: every one
// (prod for integer types only), or the one its reduce_op fixes, which it
// alone serves (ir.Plan.FixedReduce: a plan of `re max` is not an
// allreduce-sum, and runs with sum are refused). A plan whose ops fix two
// reductions serves none and every run refuses it: nil.
func proofReductions(p *ir.Plan) []ir.ReduceOp {
	fixed, err := p.FixedReduce()
	switch {
	case err != nil:
		return nil
	case fixed != ir.ReduceNone:
		return []ir.ReduceOp{fixed}
	}
	return diffReduces
}

// The plan-level mutations, by the first byte of each 5-byte group.
const (
	mutDropNop = iota
	mutDropSync
	mutMoveSync
	mutSwapRelaxed
	mutChunkIndex
	mutPipeline
	mutDoubleScratch
	mutFixReduce
	mutDupSync
	mutAddNop
	numProofMutations
)

// proofMutate applies the mutations data encodes (5 bytes each: kind,
// rank, block, op, value) to a copy of p and says what it did. Each
// mutation finds the op of its kind at or after the indexed one, so most
// inputs change something. It returns nil when p cannot be copied.
func proofMutate(p *ir.Plan, data []byte) (*ir.Plan, string) {
	js, err := ir.Encode(p)
	if err != nil {
		return nil, ""
	}
	q, ds := ir.Decode(js)
	if ds.HasErrors() {
		return nil, ""
	}
	var did []string
	for ; len(data) >= 5; data = data[5:] {
		kind, v := data[0]%numProofMutations, data[4]
		if kind == mutDoubleScratch {
			q.DoubleScratch = !q.DoubleScratch
			did = append(did, fmt.Sprintf("double scratch %v", q.DoubleScratch))
			continue
		}
		g := &q.GPUs[int(data[1])%len(q.GPUs)]
		if len(g.ThreadBlocks) == 0 {
			continue
		}
		b := int(data[2]) % len(g.ThreadBlocks)
		tb := &g.ThreadBlocks[b]
		if s := mutateOps(&tb.Ops, kind, int(data[3]), v); s != "" {
			did = append(did, fmt.Sprintf("rank %d block %d: %s", g.ID, b, s))
		}
	}
	if len(did) == 0 {
		return q, "none"
	}
	return q, strings.Join(did, "; ")
}

func isSyncOp(c ir.OpCode) bool {
	switch c {
	case ir.OpSignal, ir.OpWait, ir.OpRlxSignal, ir.OpRlxWait, ir.OpFlush:
		return true
	}
	return false
}

// mutateOps applies one mutation of kind to the ops of a block (or of a
// pipeline body, where the chosen op is a pipeline and v's top bit says
// to go in), starting the search at index at.
func mutateOps(ops *[]ir.Op, kind byte, at int, v byte) string {
	l := *ops
	if len(l) == 0 {
		return ""
	}
	// find returns the first op from at (cyclically) that ok accepts.
	find := func(ok func(*ir.Op) bool) int {
		for k := range l {
			i := (at + k) % len(l)
			if ok(&l[i]) {
				return i
			}
		}
		return -1
	}
	if i := at % len(l); l[i].Code == ir.OpPipeline && v&0x80 != 0 {
		body := l[i].Ops()
		s := mutateOps(&body, kind, int(v), v&0x7f)
		l[i].SetOps(body)
		if s == "" {
			return ""
		}
		return fmt.Sprintf("in pipeline op %d: %s", i, s)
	}
	switch kind {
	case mutDropNop, mutDropSync:
		want := func(o *ir.Op) bool { return o.Code == ir.OpNop }
		if kind == mutDropSync {
			want = func(o *ir.Op) bool { return isSyncOp(o.Code) }
		}
		i := find(want)
		if i < 0 {
			return ""
		}
		name := l[i].Code.String()
		*ops = append(l[:i:i], l[i+1:]...)
		return fmt.Sprintf("drop op %d (%s)", i, name)
	case mutMoveSync:
		i := find(func(o *ir.Op) bool { return isSyncOp(o.Code) })
		j := i + 1
		if v&1 != 0 {
			j = i - 1
		}
		if i < 0 || j < 0 || j >= len(l) {
			return ""
		}
		l[i], l[j] = l[j], l[i]
		return fmt.Sprintf("swap ops %d (%s) and %d (%s)", i, l[j].Code, j, l[i].Code)
	case mutSwapRelaxed:
		swap := map[ir.OpCode]ir.OpCode{ir.OpSignal: ir.OpRlxSignal, ir.OpRlxSignal: ir.OpSignal, ir.OpWait: ir.OpRlxWait, ir.OpRlxWait: ir.OpWait}
		i := find(func(o *ir.Op) bool { _, ok := swap[o.Code]; return ok })
		if i < 0 {
			return ""
		}
		old := l[i].Code
		l[i].Code = swap[old]
		return fmt.Sprintf("op %d %s -> %s", i, old, l[i].Code)
	case mutChunkIndex:
		i := find(func(o *ir.Op) bool { return len(o.Src)+len(o.Dst) > 0 })
		if i < 0 {
			return ""
		}
		o := &l[i]
		refs, side := o.Src, "src"
		if v&1 != 0 && len(o.Dst) > 0 || len(o.Src) == 0 {
			refs, side = o.Dst, "dst"
		}
		k := int(v>>1) % len(refs)
		d := 1
		if v&0x40 != 0 {
			d = -1
		}
		if refs[k].Index+d < 0 {
			d = -d
		}
		refs[k].Index += d
		return fmt.Sprintf("op %d (%s) %s[%d].index %+d", i, o.Code, side, k, d)
	case mutPipeline:
		i := find(func(o *ir.Op) bool { return o.Info().Class != ir.ClassControl && len(o.Src)+len(o.Dst) > 0 })
		if i < 0 {
			return ""
		}
		unit := 16 << (v % 5)
		var pipe ir.Op
		pipe.Code = ir.OpPipeline
		pipe.SetIter(&ir.IterContext{UnitSize: unit, NumChunks: 1})
		pipe.SetOps([]ir.Op{l[i]})
		l[i] = pipe
		return fmt.Sprintf("op %d (%s) in a pipeline of %d-byte windows", i, pipe.Ops()[0].Code, unit)
	case mutFixReduce:
		i := find(func(o *ir.Op) bool { return o.Info().Reduces })
		if i < 0 {
			return ""
		}
		r := []ir.ReduceOp{ir.ReduceMax, ir.ReduceMin, ir.ReduceSum}[int(v)%3]
		l[i].SetReduceOp(r)
		return fmt.Sprintf("op %d (%s) reduce_op %s", i, l[i].Code, r)
	case mutDupSync:
		i := find(func(o *ir.Op) bool { return isSyncOp(o.Code) })
		if i < 0 {
			return ""
		}
		dup := l[i]
		dup.ChannelIDs = append([]int(nil), dup.ChannelIDs...)
		*ops = append(l[:i+1:i+1], append([]ir.Op{dup}, l[i+1:]...)...)
		return fmt.Sprintf("duplicate op %d (%s)", i, dup.Code)
	case mutAddNop:
		i := at % (len(l) + 1)
		*ops = append(l[:i:i], append([]ir.Op{{Code: ir.OpNop}}, l[i:]...)...)
		return fmt.Sprintf("nop before op %d", i)
	}
	return ""
}
