package cpu

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/internal/golden"
	"github.com/msccl-go/msccl-go/ir"
)

// symDir holds the library algorithms compiled without verification:
//
//	go run ./cmd/msccl-compile compile algorithms/X.msccl -D ranks=R --no-verify -o testdata/symbolic/X_rR.json
//
// (ranks 4 for every algorithm, 3 for the rings, 8 for the hierarchical
// ones, which need two nodes of four).
const symDir = "../../testdata/symbolic"

// symPlans is every plan the differential test compares verdicts on.
func symPlans(t *testing.T) map[string]*ir.Plan {
	t.Helper()
	plans := fixtures(t)
	paths, err := filepath.Glob(filepath.Join(symDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no plans in %s: %v", symDir, err)
	}
	for _, p := range paths {
		plans["library/"+filepath.Base(p)] = loadPlan(t, p)
	}
	for name, p := range collectivePlans() {
		plans["direct/"+name] = p
	}
	return plans
}

// byteVerdicts runs p at the byte level under every reduction and type
// the differential test covers; ok is whether all of them are correct.
func byteVerdicts(t *testing.T, p *ir.Plan, size int64, launches, llWidth int) (ok bool, why string) {
	ok = true
	for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceMax} {
		for _, dt := range []DType{F32, BF16, I32} {
			rep, err := Run(p, Options{Size: size, DType: dt, Reduce: red, Launches: launches, LLWidth: llWidth, Seed: 5})
			if err != nil {
				t.Fatalf("%s %s: %v", red, dt, err)
			}
			if !rep.OK() {
				ok = false
				why += fmt.Sprintf("%s/%s: %s", red, dt, rep)
			}
		}
	}
	return ok, why
}

// TestSymbolicAgreesOnLibrary: for the library algorithms, the upstream
// fixtures and the direct plans, the symbolic verdict equals the
// byte-level one under sum, min and max in f32, bf16 and i32, at sizes
// that split evenly (one, three and eight alignment units per chunk),
// 1 to 5 launches, and both LL packet widths for LL plans.
func TestSymbolicAgreesOnLibrary(t *testing.T) {
	plans := symPlans(t)
	launches := []int{1, 2, 3, 4, 5}
	mults := []int64{1, 3, 8}
	if fulltest.Sample() {
		launches, mults = []int{1, 3}, []int64{1, 3}
	}
	for _, name := range sortedNames(plans) {
		p := plans[name]
		unit := sizes(p)[0]
		widths := []int{16}
		if p.Protocol == ir.LL {
			widths = []int{16, 8}
		}
		for _, mult := range mults {
			size := mult * unit
			for _, l := range launches {
				for _, ll := range widths {
					t.Run(fmt.Sprintf("%s/%d/%d/ll%d", name, size, l, ll), func(t *testing.T) {
						sym, err := Run(p, Options{Size: size, Symbolic: true, Launches: l, LLWidth: ll, Seed: 5})
						if err != nil {
							t.Fatal(err)
						}
						ok, why := byteVerdicts(t, p, size, l, ll)
						if sym.OK() != ok {
							t.Fatalf("symbolic says %s, byte level all correct: %v\nsymbolic:\n%s\nbyte level:\n%s", sym.Verdict, ok, sym, why)
						}
						if _, racy := knownRacy[name]; !ok && !racy {
							t.Errorf("library plan is not correct:\n%s", why)
						}
					})
				}
			}
		}
	}
}

// dataMutations changes what data ops read: every source index moved by
// one chunk, every extra reduction source dropped or doubled. Most keep
// the plan race-free and change only results, which is what the
// differential test needs (the sync mutations of mutate_test.go mostly
// make races). At most limit are kept, spread over the plan.
func dataMutations(p *ir.Plan, limit int) []mutation {
	var ms []mutation
	visit := func(r, b, op, inner int, o *ir.Op) {
		if !o.Info().Reduces && o.Code != ir.OpCopy && o.Code != ir.OpPut && o.Code != ir.OpGet {
			return
		}
		pl := Place{Rank: r, Block: b, Op: op, Inner: inner, OpName: o.Code.String()}
		for k := range o.Src {
			for _, delta := range []int{-1, 1} {
				if o.Src[k].Index+delta < 0 {
					continue
				}
				ms = append(ms, mutation{fmt.Sprintf("move %s src_buff[%d] by %+d", pl, k, delta), func(q *ir.Plan) {
					ops, _, i := opList(q, r, b, op, inner)
					ops[i].Src[k].Index += delta
				}})
			}
			if !o.Info().Reduces {
				continue
			}
			if len(o.Src) > 2 {
				ms = append(ms, mutation{fmt.Sprintf("drop %s src_buff[%d]", pl, k), func(q *ir.Plan) {
					ops, _, i := opList(q, r, b, op, inner)
					ops[i].Src = append(ops[i].Src[:k], ops[i].Src[k+1:]...)
				}})
			}
			ms = append(ms, mutation{fmt.Sprintf("double %s src_buff[%d]", pl, k), func(q *ir.Plan) {
				ops, _, i := opList(q, r, b, op, inner)
				ops[i].Src = append(ops[i].Src, ops[i].Src[k])
			}})
		}
	}
	eachOp(p, visit)
	if len(ms) <= limit {
		return ms
	}
	var kept []mutation
	for k := range limit {
		kept = append(kept, ms[k*len(ms)/limit])
	}
	return kept
}

// TestSymbolicAgreesOnMutants: for single-point mutations of every plan
// of the library test that only change results (no race, deadlock or
// unbalanced signal), the symbolic verdict is "wrong" exactly when some
// byte-level run (sum, min, max × f32, bf16, i32) is wrong.
func TestSymbolicAgreesOnMutants(t *testing.T) {
	plans := symPlans(t)
	limit := 12
	if fulltest.Sample() {
		limit = 4
	}
	compared, wrong := 0, 0
	for _, name := range sortedNames(plans) {
		if _, racy := knownRacy[name]; racy {
			continue
		}
		p := plans[name]
		for _, m := range append(fulltest.Stride(mutations(p), 8), dataMutations(p, limit)...) {
			q := clonePlan(p)
			m.apply(q)
			size := sizes(p)[0] * 4
			sym, err := Run(q, Options{Size: size, Symbolic: true, Seed: 9})
			if err != nil {
				continue
			}
			if len(sym.Deadlocks)+len(sym.Races)+len(sym.Unbalanced) > 0 {
				continue
			}
			compared++
			if !sym.OK() {
				wrong++
			}
			ok, why := byteVerdicts(t, q, size, 2, 0)
			if sym.OK() != ok {
				t.Errorf("%s: %s: symbolic %s, byte level all correct %v\n%s\n%s", name, m.name, sym.Verdict, ok, sym, why)
			}
		}
	}
	t.Logf("%d result-only mutants compared, %d wrong", compared, wrong)
}

// reduceScatterWith is the direct reduce-scatter with rank 0's reduction
// sources edited.
func reduceScatterWith(edit func(src []ir.BufRef, peers []int) []ir.BufRef, scratch int) *ir.Plan {
	const n = 4
	return direct(ir.ReduceScatter, ir.ChanMemory, n, n, 1, scratch, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		rre := ir.Op{Code: ir.OpRre, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, r)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}}
		for i := range peers {
			rre.Src = append(rre.Src, rem(len(peers)+i, r))
		}
		if r == 0 {
			rre.Src = edit(rre.Src, peers)
		}
		return append(append(ops, rre), finale(ir.ChanMemory, peers)...)
	})
}

// TestSymbolicExplains builds one defect of each class and checks the
// verdict, the decoded terms, the words and the writer.
func TestSymbolicExplains(t *testing.T) {
	const size = 4 * 64 // 4 chunks of 64 bytes: 8 fingerprints each
	rreAt := Place{Rank: 0, Block: 0, Op: 3, Inner: -1, OpName: "rre"}
	tests := []struct {
		name string
		plan *ir.Plan
		// byteOK: the byte-level run under sum (zeroed scratch) calls
		// it correct, the hole symbolic mode closes.
		byteOK  bool
		terms   []Term // of the first wrong element, rank 0 launch 0
		explain string
		writer  *Place
	}{
		{
			name: "missing contribution",
			plan: reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { return src[:3] }, 0),
			// Rank 0's peers are 1, 2, 3; dropping the last source
			// drops rank 3.
			terms:   []Term{{Rank: 3, Launch: 0, Elem: 0, Count: -1}},
			explain: "rank 3's contribution to output element 0 (chunk 0) is missing",
			writer:  &rreAt,
		},
		{
			name:    "double contribution",
			plan:    reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { return append(src, src[1]) }, 0),
			terms:   []Term{{Rank: 1, Launch: 0, Elem: 0, Count: 1}},
			explain: "rank 1's contribution added twice",
			writer:  &rreAt,
		},
		{
			name:    "poison read",
			plan:    reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { return append(src, loc(ir.BufScratch, 1)) }, 2),
			byteOK:  true,
			terms:   []Term{{Rank: 0, Elem: 64, Count: 1, Poison: true, Buffer: ir.BufScratch}},
			explain: "includes bytes nobody wrote (poison from rank 0 scratch byte 64)",
			writer:  &rreAt,
		},
		{
			name: "wrong chunk",
			plan: reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef {
				src[2].Index = 1 // rank 2's chunk 1 instead of chunk 0
				return src
			}, 0),
			terms:   []Term{{Rank: 2, Launch: 0, Elem: 0, Count: -1}, {Rank: 2, Launch: 0, Elem: 8, Count: 1}},
			explain: "holds rank 2's element 8 (chunk 1) instead of element 0 (chunk 0): wrong chunk",
			writer:  &rreAt,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			byteRep, err := Run(tc.plan, Options{Size: size, DType: I32, Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			if byteRep.OK() != tc.byteOK {
				t.Fatalf("byte-level verdict %s, want correct=%v\n%s", byteRep.Verdict, tc.byteOK, byteRep)
			}
			rep, err := Run(tc.plan, Options{Size: size, Symbolic: true, Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != WrongResult || len(rep.Wrong) == 0 {
				t.Fatalf("verdict %s, want wrong result\n%s", rep.Verdict, rep)
			}
			m := rep.Wrong[0]
			if m.Launch != 0 || m.Rank != 0 || m.Elem != 0 {
				t.Fatalf("first wrong element is launch %d rank %d element %d\n%s", m.Launch, m.Rank, m.Elem, rep)
			}
			if fmt.Sprint(m.Terms) != fmt.Sprint(tc.terms) {
				t.Errorf("terms %+v, want %+v", m.Terms, tc.terms)
			}
			if !strings.Contains(m.Explain, tc.explain) {
				t.Errorf("explanation %q does not say %q", m.Explain, tc.explain)
			}
			if !samePlace(m.Writer, tc.writer) {
				t.Errorf("writer %v, want %v", m.Writer, tc.writer)
			}
			// Each chunk is 8 elements; every launch of rank 0's output
			// is wrong the same way, one finding each.
			if len(rep.Findings) != 2 || rep.Findings[0].Elems != 8 || rep.Findings[0].Off != 0 || rep.Findings[0].End != 64 {
				t.Errorf("findings %+v, want one of 8 elements per launch", rep.Findings)
			}
			if rep.WrongTotal != 16 {
				t.Errorf("%d wrong elements, want 16 (8 per launch)", rep.WrongTotal)
			}
		})
	}
}

// TestPoisonReadFailsUnderMax: the plan that reads an unwritten scratch
// slot is right under sum on zeroed scratch; max exposes it at the byte
// level too (max(x, 0) is not x for negative x), as the symbolic proof
// said without choosing a reduction.
func TestPoisonReadFailsUnderMax(t *testing.T) {
	p := reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { return append(src, loc(ir.BufScratch, 1)) }, 2)
	rep, err := Run(p, Options{Size: 256, DType: I32, Reduce: ir.ReduceMax, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatalf("max over zeroed scratch passed:\n%s", rep)
	}
}

// clobberingAllGather is the direct allgather whose rank 1 copies a
// peer's gathered chunk over its own input once everything has landed.
func clobberingAllGather() *ir.Plan {
	p := clonePlan(collectivePlans()["allgather"])
	ops := &p.GPUs[1].ThreadBlocks[0].Ops
	*ops = append(*ops, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufOutput, 2)}, Dst: []ir.BufRef{loc(ir.BufInput, 0)}})
	return p
}

// TestInputClobbered: an out-of-place collective must leave its input as
// it found it, in symbolic and byte-level runs alike, and the report
// names the op that wrote it.
func TestInputClobbered(t *testing.T) {
	p := clobberingAllGather()
	at := len(p.GPUs[1].ThreadBlocks[0].Ops) - 1
	for _, opt := range []Options{{Size: 4 * 64, DType: I32, Launches: 3}, {Size: 4 * 64, Symbolic: true, Launches: 3}} {
		t.Run(fmt.Sprint(opt.Symbolic), func(t *testing.T) {
			rep, err := Run(p, opt)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != WrongResult || rep.WrongTotal != 0 {
				t.Fatalf("verdict %s with %d wrong output elements, want wrong result from the input only\n%s", rep.Verdict, rep.WrongTotal, rep)
			}
			if len(rep.Clobbered) != 3 || rep.ClobberedBytes != 3*64 {
				t.Fatalf("clobbered %+v (%d bytes), want rank 1's 64 input bytes in each of 3 launches", rep.Clobbered, rep.ClobberedBytes)
			}
			c := rep.Clobbered[0]
			want := Place{Rank: 1, Block: 0, Op: at, Inner: -1, OpName: "copy"}
			if c.Rank != 1 || c.Off != 0 || c.End != 64 || !samePlace(c.Writer, &want) {
				t.Fatalf("clobber %+v, want rank 1 [0:64) by %v", c, want)
			}
			wantLine := "input overwritten: launch 0: rank 1's input bytes [0:64) overwritten by gpus[1].threadblocks[0].ops[" + fmt.Sprint(at) + "] (copy)"
			if !strings.Contains(rep.String(), wantLine) {
				t.Errorf("report lacks %q:\n%s", wantLine, rep)
			}
		})
	}
}

// TestExplainWording covers the phrases plans above do not reach: stale
// data, many ranks folded, poison lists, and ranges.
func TestExplainWording(t *testing.T) {
	p := collectivePlans()["reducescatter"]
	s := &sim{p: p, opt: Options{Size: 4 * 64, Symbolic: true}}
	if err := s.options(); err != nil {
		t.Fatal(err)
	}
	if err := s.setup(); err != nil {
		t.Fatal(err)
	}
	one := span{rank: 0, i0: 0, n: 1, launch: 1}
	tests := []struct {
		terms []Term
		sp    span
		want  string
	}{
		{[]Term{{Rank: 2, Launch: 1, Elem: 0, Count: -1}, {Rank: 2, Launch: 0, Elem: 0, Count: 1}}, one,
			"stale: rank 2's input from launch 0 in launch 1, at element 0 (chunk 0)"},
		{[]Term{{Rank: 0, Launch: 1, Count: -1}, {Rank: 1, Launch: 1, Count: -1}, {Rank: 2, Launch: 1, Count: -1}, {Rank: 3, Launch: 1, Count: -1}}, one,
			"the contributions of every rank to output element 0 (chunk 0) are missing"},
		{[]Term{{Rank: 1, Launch: 1, Count: -1}, {Rank: 3, Launch: 1, Count: -1}}, span{rank: 0, i0: 0, n: 16, launch: 1},
			"the contributions of ranks 1 and 3 to output elements 0–15 (chunks 0–1) are missing"},
		{[]Term{{Rank: 1, Launch: 1, Count: 1}, {Rank: 2, Launch: 1, Count: 1}}, one,
			"the contributions of ranks 1 and 2 added twice"},
		{[]Term{{Rank: 0, Launch: 1, Elem: 8, Count: -1}, {Rank: 1, Launch: 1, Elem: 8, Count: -1}, {Rank: 2, Launch: 1, Elem: 8, Count: -1}, {Rank: 3, Launch: 1, Elem: 8, Count: -1},
			{Rank: 0, Launch: 1, Elem: 16, Count: 1}, {Rank: 1, Launch: 1, Elem: 16, Count: 1}, {Rank: 2, Launch: 1, Elem: 16, Count: 1}, {Rank: 3, Launch: 1, Elem: 16, Count: 1}},
			span{rank: 1, i0: 0, n: 1, launch: 1},
			"holds every rank's element 16 (chunk 2) instead of element 8 (chunk 1): wrong chunk"},
		{[]Term{{Rank: 0, Elem: 0, Count: 1, Poison: true, Buffer: ir.BufScratch}, {Rank: 1, Elem: 8, Count: 1, Poison: true, Buffer: ir.BufScratch},
			{Rank: 2, Elem: 16, Count: 1, Poison: true, Buffer: ir.BufScratch}, {Rank: 3, Elem: 24, Count: 1, Poison: true, Buffer: ir.BufOutput}}, one,
			"includes bytes nobody wrote (poison from rank 0 scratch byte 0, rank 1 scratch byte 8, rank 2 scratch byte 16 and 1 more)"},
	}
	for _, tc := range tests {
		if got := s.explain(tc.terms, tc.sp); !strings.Contains(got, tc.want) {
			t.Errorf("explain(%+v) = %q, want %q", tc.terms, got, tc.want)
		}
	}
	if got := who([]int{1, 2, 3, 4, 5, 6, 7}, 16); got != "ranks 1, 2, 3 and 4 more ranks" {
		t.Errorf("who = %q", got)
	}
}

// TestWriterMap checks the interval map behind Mismatch.Writer.
func TestWriterMap(t *testing.T) {
	var m writerMap
	m.set(0, 64, 1, 0)
	m.set(64, 128, 1, 0) // merges
	m.set(32, 48, 2, 0)  // splits
	m.set(100, 200, 3, 1)
	want := []wseg{{0, 32, 1, 0}, {32, 48, 2, 0}, {48, 100, 1, 0}, {100, 200, 3, 1}}
	if fmt.Sprint(m.segs) != fmt.Sprint(want) {
		t.Fatalf("segments %v, want %v", m.segs, want)
	}
	if g, ok := m.at(40); !ok || g.place != 2 {
		t.Errorf("at(40) = %v %v", g, ok)
	}
	if _, ok := m.at(200); ok {
		t.Errorf("at(200) found a writer")
	}
	m.del(20, 110)
	want = []wseg{{0, 20, 1, 0}, {110, 200, 3, 1}}
	if fmt.Sprint(m.segs) != fmt.Sprint(want) {
		t.Fatalf("after del: segments %v, want %v", m.segs, want)
	}
	m.set(0, 300, 4, 2)
	if len(m.segs) != 1 {
		t.Errorf("cover-all left %v", m.segs)
	}
}

// lateSendRecv is a two-rank sendrecv whose ranks copy their scratch slot
// to the output before the peer has put this launch's input there (the
// put waits for the copy, so there is no race): launch 0 outputs poison,
// every later launch the previous launch's data.
func lateSendRecv() *ir.Plan {
	p := direct(ir.SendRecv, ir.ChanMemory, 2, 1, 1, 1, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		ops = append(ops,
			ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufScratch, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}},
			nop, syncOp(ir.OpSignal, ir.ChanMemory, 0), syncOp(ir.OpWait, ir.ChanMemory, 0), nop,
			// Remote buffer 2 is the peer's scratch (added below).
			ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{rem(2, 0)}})
		return append(ops, finale(ir.ChanMemory, peers)...)
	})
	for r := range p.GPUs {
		g := &p.GPUs[r]
		g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: 1 - r, Type: ir.BufScratch, AccessChannelTypes: []ir.ChannelType{ir.ChanMemory}})
		refs := &g.ThreadBlocks[0].RemoteBufferRefs[0]
		refs.RemoteBufferIDs = append(refs.RemoteBufferIDs, 2)
	}
	return p
}

// TestSymbolicStale: reading before the peer wrote decodes as poison in
// the first launch and as the previous launch's input afterwards.
func TestSymbolicStale(t *testing.T) {
	p := lateSendRecv()
	if rep, err := Run(p, Options{Size: 64, DType: I32, Launches: 3}); err != nil || rep.Verdict != WrongResult {
		t.Fatalf("byte level: %v\n%s", err, rep)
	}
	rep, err := Run(p, Options{Size: 64, Symbolic: true, Launches: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != WrongResult {
		t.Fatalf("verdict %s\n%s", rep.Verdict, rep)
	}
	copyAt := Place{Rank: 0, Block: 0, Op: 3, Inner: -1, OpName: "copy"}
	want := map[int]string{
		0: "rank 1's contribution to output elements 0–7 (chunk 0) is missing; includes bytes nobody wrote (poison from rank 0 scratch bytes [0:64))",
		1: "stale: rank 1's input from launch 0 in launch 1, at elements 0–7 (chunk 0)",
		2: "stale: rank 1's input from launch 1 in launch 2, at elements 0–7 (chunk 0)",
	}
	seen := 0
	for _, f := range rep.Findings {
		if f.Rank != 0 {
			continue
		}
		seen++
		if f.Explain != want[f.Launch] || f.Elems != 8 || !samePlace(f.Writer, &copyAt) {
			t.Errorf("launch %d: %d elements by %v: %q, want 8 by %v: %q", f.Launch, f.Elems, f.Writer, f.Explain, copyAt, want[f.Launch])
		}
	}
	if seen != 3 {
		t.Errorf("%d findings for rank 0, want one per launch\n%s", seen, rep)
	}
}

// TestSymbolicStreams: a streaming run reports the same wrong elements,
// findings and clobbers as a keeping run (the writers of each launch are
// kept until that launch is checked, whenever that is).
func TestSymbolicStreams(t *testing.T) {
	plans := map[string]*ir.Plan{
		"stale":    lateSendRecv(),
		"clobber":  clobberingAllGather(),
		"missing":  reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { return src[:2] }, 0),
		"poisoned": reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { return append(src, loc(ir.BufScratch, 1)) }, 2),
	}
	for _, name := range []string{"stale", "clobber", "missing", "poisoned"} {
		t.Run(name, func(t *testing.T) {
			// Streaming runs per element (it hands over bytes): compare it
			// with the per-element run that keeps them.
			opt := Options{Size: 256, Symbolic: true, PerElement: true, Launches: 4}
			keep, err := Run(plans[name], opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.OnLaunch = func(int, [][]byte, [][]byte) error { return nil }
			st, err := Run(plans[name], opt)
			if err != nil {
				t.Fatal(err)
			}
			if keep.OK() || st.String() != keep.String() || fmt.Sprint(st.Findings) != fmt.Sprint(keep.Findings) {
				t.Errorf("streaming report differs:\n%s\nkeeping:\n%s", st, keep)
			}
		})
	}
}

// TestSymbolicManyRanks: past 8 ranks the decoder tries only the
// coefficient vectors near "each once" and "none"; one missing source
// of 16 is still named.
func TestSymbolicManyRanks(t *testing.T) {
	p := synthAllReduce(16, 1, 1)
	ops := p.GPUs[5].ThreadBlocks[0].Ops
	drop := -1
	for i, o := range ops {
		if o.Code == ir.OpRre {
			drop = i
			break
		}
	}
	if drop < 0 {
		t.Fatal("no rre in the synthetic plan")
	}
	o := &ops[drop]
	lost := o.Src[len(o.Src)-1]
	o.Src = o.Src[:len(o.Src)-1]
	rep, err := Run(p, Options{Size: 16 * 16 * 4, Symbolic: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != WrongResult || len(rep.Findings) == 0 {
		t.Fatalf("verdict %s\n%s", rep.Verdict, rep)
	}
	f := rep.Findings[0]
	if len(f.Terms) != 1 || f.Terms[0].Count != -1 || !strings.Contains(f.Explain, "contribution to output") {
		t.Errorf("dropping %+v of rank 5's rre: %+v", lost, f)
	}
}

// TestSymbolicIgnoresReduceOp: fingerprints add whatever the run's
// reduction or an op's reduce_op says, so the verdict is about the data
// flow alone. A plan whose reduce_op fixes max serves max alone, which a
// symbolic run refuses like any other (TestFixedReduction); the sum ops
// of an unfixed plan add whatever the run names.
func TestSymbolicIgnoresReduceOp(t *testing.T) {
	p := reduceFixtureWith(t, ir.ReduceSum)
	for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceProd} {
		rep, err := Run(p, Options{Size: 4096, Symbolic: true, DType: F16, Reduce: red})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Errorf("reduction %s: %s", red, rep)
		}
	}
}

// TestBrokenSymbolic: the broken fixtures reach the same verdict in
// symbolic mode; the wrong-result ones have a golden symbolic report
// (<name>.symbolic.want, rewritten by -update) whose findings say what
// is wrong in words.
func TestBrokenSymbolic(t *testing.T) {
	for _, c := range brokenCases {
		name := strings.TrimSuffix(c.file, ".json")
		t.Run(name, func(t *testing.T) {
			rep := c.run(t, Options{Symbolic: true})
			if c.want != WrongResult {
				return
			}
			got := "# " + c.why + " (symbolic)\n" + rep.String()
			golden.Check(t, filepath.Join(brokenDir, name+".symbolic.want"), []byte(got), *update)
		})
	}
}

// TestSymbolicUnwritten: an in-place output element no op writes keeps
// the host's input; it has no writer in any launch (the host's write
// replaces the previous launch's writer).
func TestSymbolicUnwritten(t *testing.T) {
	p := clonePlan(collectivePlans()["reducescatter_inplace"])
	ops := p.GPUs[0].ThreadBlocks[0].Ops
	for i := range ops {
		if ops[i].Code == ir.OpRre {
			ops[i] = nop
		}
	}
	rep, err := Run(p, Options{Size: 4 * 64, Symbolic: true, Launches: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := "no op wrote it; the contributions of ranks 1, 2 and 3 to output elements 0–7 (chunk 0) are missing"
	if len(rep.Findings) != 3 {
		t.Fatalf("%d findings, want one per launch\n%s", len(rep.Findings), rep)
	}
	for _, f := range rep.Findings {
		if f.Writer != nil || f.Explain != want {
			t.Errorf("launch %d: writer %v, %q; want none, %q", f.Launch, f.Writer, f.Explain, want)
		}
	}
}

// TestSymbolicUnwrittenOutput: an allgather chunk nobody puts is poison
// in place and out of place alike.
func TestSymbolicUnwrittenOutput(t *testing.T) {
	for _, name := range []string{"allgather", "allgather_inplace"} {
		t.Run(name, func(t *testing.T) {
			p := clonePlan(collectivePlans()[name])
			ops := p.GPUs[1].ThreadBlocks[0].Ops
			for i := range ops {
				if ops[i].Code == ir.OpPut {
					// Peer 0 (remote output 0) never gets rank 1's chunk.
					ops[i].Src, ops[i].Dst = ops[i].Src[1:], ops[i].Dst[1:]
				}
			}
			rep, err := Run(p, Options{Size: 4 * 64, Symbolic: true, Launches: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := "no op wrote it; rank 1's contribution to output elements 8–15 (chunk 1) is missing; includes bytes nobody wrote (poison from rank 0 output bytes [64:128))"
			if len(rep.Findings) != 1 || rep.Findings[0].Rank != 0 || rep.Findings[0].Explain != want {
				t.Fatalf("findings %+v, want rank 0: %q\n%s", rep.Findings, want, rep)
			}
		})
	}
}

// TestSymbolicInterleavingIndependent: the symbolic report of race-free
// wrong plans, explanations and writers included, does not depend on the
// interleaving that ran.
func TestSymbolicInterleavingIndependent(t *testing.T) {
	plans := map[string]*ir.Plan{
		"stale":   lateSendRecv(),
		"clobber": clobberingAllGather(),
		"chunk":   reduceScatterWith(func(src []ir.BufRef, _ []int) []ir.BufRef { src[2].Index = 1; return src }, 0),
		"broken":  loadPlan(t, filepath.Join(brokenDir, "wrong_chunk.json")),
	}
	for _, name := range []string{"stale", "clobber", "chunk", "broken"} {
		p := plans[name]
		opt := Options{Size: sizes(p)[0] * 4, Symbolic: true, Launches: 3}
		base, err := Run(p, opt)
		if err != nil {
			t.Fatal(err)
		}
		if base.OK() {
			t.Fatalf("%s: correct", name)
		}
		for seed := uint64(1); seed <= 4; seed++ {
			opt.sched = seed
			rep, err := Run(p, opt)
			if err != nil {
				t.Fatal(err)
			}
			if rep.String() != base.String() {
				t.Errorf("%s: schedule %d reports\n%s\nbase:\n%s", name, seed, rep, base)
			}
		}
	}
}
