package cpu

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// peerIndex is q's position in a direct plan's peer list of rank r.
func peerIndex(r, q int) int {
	if q > r {
		return q - 1
	}
	return q
}

// rootedPlans are direct algorithms of the rooted collectives and of
// sendrecv with a peer map, at 4 ranks, out of place and in place.
func rootedPlans(root int, peersMap []int) map[string]*ir.Plan {
	const n = 4
	m := map[string]*ir.Plan{}
	copyOp := func(src, dst ir.BufRef) ir.Op {
		return ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{src}, Dst: []ir.BufRef{dst}}
	}
	for _, inplace := range []bool{false, true} {
		sfx := ""
		if inplace {
			sfx = "_inplace"
		}
		// broadcast: the root puts its input into every output.
		m["broadcast"+sfx] = direct(ir.Broadcast, ir.ChanMemory, n, 1, 1, 0, func(r int, peers []int) []ir.Op {
			ops := handshake(peers)
			if r == root {
				if !inplace {
					ops = append(ops, copyOp(loc(ir.BufInput, 0), loc(ir.BufOutput, 0)))
				}
				ops = append(ops, putToAll(peers))
			}
			return append(ops, finale(ir.ChanMemory, peers)...)
		})
		// reduce: the root reads every input (rre) into its output.
		m["reduce"+sfx] = direct(ir.Reduce, ir.ChanMemory, n, 1, 1, 0, func(r int, peers []int) []ir.Op {
			ops := handshake(peers)
			if r == root {
				rre := ir.Op{Code: ir.OpRre, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{loc(ir.BufOutput, 0)}}
				for i := range peers {
					rre.Src = append(rre.Src, rem(len(peers)+i, 0))
				}
				ops = append(ops, rre)
			}
			return append(ops, finale(ir.ChanMemory, peers)...)
		})
		// gather: every rank puts its input into chunk r of the root's output.
		m["gather"+sfx] = direct(ir.Gather, ir.ChanMemory, n, 1, n, 0, func(r int, peers []int) []ir.Op {
			ops := handshake(peers)
			switch {
			case r != root:
				ops = append(ops, ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{rem(peerIndex(r, root), r)}})
			case !inplace:
				ops = append(ops, copyOp(loc(ir.BufInput, 0), loc(ir.BufOutput, r)))
			}
			return append(ops, finale(ir.ChanMemory, peers)...)
		})
		// scatter: the root puts input chunk q into rank q's output.
		m["scatter"+sfx] = direct(ir.Scatter, ir.ChanMemory, n, n, 1, 0, func(r int, peers []int) []ir.Op {
			ops := handshake(peers)
			if r == root {
				if !inplace {
					ops = append(ops, copyOp(loc(ir.BufInput, r), loc(ir.BufOutput, 0)))
				}
				put := ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory}
				for i, q := range peers {
					put.Src = append(put.Src, loc(ir.BufInput, q))
					put.Dst = append(put.Dst, rem(i, 0))
				}
				ops = append(ops, put)
			}
			return append(ops, finale(ir.ChanMemory, peers)...)
		})
		for _, name := range []string{"broadcast", "reduce", "gather", "scatter"} {
			m[name+sfx].Root = root
			m[name+sfx].InPlace = inplace
		}
	}
	// sendrecv: rank r puts its input into the output of peersMap[r].
	sr := direct(ir.SendRecv, ir.ChanMemory, n, 1, 1, 0, func(r int, peers []int) []ir.Op {
		ops := handshake(peers)
		if q := peersMap[r]; q == r {
			ops = append(ops, copyOp(loc(ir.BufInput, 0), loc(ir.BufOutput, 0)))
		} else {
			ops = append(ops, ir.Op{Code: ir.OpPut, ChannelType: ir.ChanMemory, Src: []ir.BufRef{loc(ir.BufInput, 0)}, Dst: []ir.BufRef{rem(peerIndex(r, q), 0)}})
		}
		return append(ops, finale(ir.ChanMemory, peers)...)
	})
	sr.Peers = peersMap
	m["sendrecv"] = sr
	return m
}

// TestRootedCollectives: direct algorithms of broadcast, reduce, gather
// and scatter at every root, and sendrecv with several peer maps, are
// correct by the byte-level and the symbolic check.
func TestRootedCollectives(t *testing.T) {
	maps := [][]int{{2, 3, 0, 1}, {0, 2, 3, 1}, {1, 0, 3, 2}}
	for root := range 4 {
		for name, p := range rootedPlans(root, maps[root%len(maps)]) {
			if ds := ir.Validate(p); ds.HasErrors() {
				t.Fatalf("%s root %d: %s", name, root, ds)
			}
			for _, sym := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/root%d/sym=%v", name, root, sym), func(t *testing.T) {
					rep, err := Run(p, Options{Size: 16 * 4 * 17, DType: I32, Launches: 3, Seed: 5, Symbolic: sym})
					if err != nil {
						t.Fatal(err)
					}
					if !rep.OK() {
						t.Fatalf("not correct:\n%s", rep)
					}
				})
			}
		}
	}
}

// TestRootedBreaks: the checks see a wrong root, a wrong peer map and a
// clobbered non-root input in place, and let a non-root output of an
// out-of-place reduce hold anything.
func TestRootedBreaks(t *testing.T) {
	m := rootedPlans(2, []int{2, 3, 0, 1})
	scribble := func(p *ir.Plan, r int, t ir.BufferType, idx int) {
		ops := &p.GPUs[r].ThreadBlocks[0].Ops
		// After the finale: every peer's access to it is over.
		*ops = append(*ops, ir.Op{Code: ir.OpCopy, Src: []ir.BufRef{loc(ir.BufScratch, 0)}, Dst: []ir.BufRef{loc(t, idx)}})
		p.GPUs[r].ScratchChunks = 1
	}
	for _, tc := range []struct {
		name, plan string
		edit       func(p *ir.Plan)
		ok         bool
	}{
		{"broadcast read as root 1", "broadcast", func(p *ir.Plan) { p.Root = 1 }, false},
		{"gather read as root 0", "gather", func(p *ir.Plan) { p.Root = 0 }, false},
		{"scatter read as root 3", "scatter", func(p *ir.Plan) { p.Root = 3 }, false},
		{"reduce read as root 0", "reduce", func(p *ir.Plan) { p.Root = 0 }, false},
		{"sendrecv read with another map", "sendrecv", func(p *ir.Plan) { p.Peers = []int{1, 2, 3, 0} }, false},
		{"sendrecv read without a map", "sendrecv", func(p *ir.Plan) { p.Peers = nil }, false},
		{"reduce: non-root output used as scratch", "reduce", func(p *ir.Plan) { scribble(p, 1, ir.BufOutput, 0) }, true},
		{"gather: non-root output used as scratch", "gather", func(p *ir.Plan) { scribble(p, 3, ir.BufOutput, 0) }, true},
		{"reduce in place: non-root input clobbered", "reduce_inplace", func(p *ir.Plan) { scribble(p, 1, ir.BufOutput, 0) }, false},
		{"gather in place: non-root input clobbered", "gather_inplace", func(p *ir.Plan) { scribble(p, 3, ir.BufOutput, 3) }, false},
		{"gather in place: non-root output elsewhere used as scratch", "gather_inplace", func(p *ir.Plan) { scribble(p, 3, ir.BufOutput, 0) }, true},
		{"scatter: non-root input clobbered", "scatter", func(p *ir.Plan) { scribble(p, 1, ir.BufInput, 2) }, false},
	} {
		for _, sym := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sym=%v", tc.name, sym), func(t *testing.T) {
				p := m[tc.plan].Clone()
				tc.edit(p)
				rep, err := Run(p, Options{Size: 16 * 4 * 9, DType: I32, Launches: 2, Symbolic: sym})
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK() != tc.ok || !tc.ok && rep.Verdict != WrongResult {
					t.Fatalf("OK() = %v, want %v (a wrong result):\n%s", rep.OK(), tc.ok, rep)
				}
			})
		}
	}
}

// TestRootedExpected checks expected element by element on small inputs.
func TestRootedExpected(t *testing.T) {
	ins := [][]byte{{1, 2, 3, 4}, {10, 20, 30, 40}, {5, 6, 7, 8}}
	cat := bytes.Join(ins, nil)
	for _, tc := range []struct {
		coll    ir.Collective
		root    int
		peers   []int
		inplace bool
		in, out int64
		want    [][]byte
		at      []int64
	}{
		{ir.Broadcast, 1, nil, false, 4, 4, [][]byte{ins[1], ins[1], ins[1]}, nil},
		{ir.Reduce, 2, nil, false, 4, 4, [][]byte{nil, nil, {16, 28, 40, 52}}, nil},
		{ir.Reduce, 0, nil, true, 4, 4, [][]byte{{16, 28, 40, 52}, ins[1], ins[2]}, nil},
		{ir.Gather, 1, nil, false, 4, 12, [][]byte{nil, cat, nil}, nil},
		{ir.Gather, 1, nil, true, 4, 12, [][]byte{ins[0], cat, ins[2]}, []int64{0, 0, 8}},
		{ir.Scatter, 1, nil, false, 3, 1, [][]byte{{10}, {20}, {30}}, nil},
		{ir.SendRecv, 0, nil, false, 4, 4, [][]byte{ins[2], ins[0], ins[1]}, nil},
		{ir.SendRecv, 0, []int{2, 1, 0}, false, 4, 4, [][]byte{ins[2], ins[1], ins[0]}, nil},
	} {
		p := &ir.Plan{Collective: tc.coll, Root: tc.root, Peers: tc.peers, InPlace: tc.inplace, GPUs: make([]ir.GPU, 3)}
		s := &sim{p: p, opt: Options{DType: U8}, red: ir.ReduceSum, in: tc.in, out: tc.out}
		if tc.coll == ir.Scatter {
			ins := [][]byte{{1, 2, 3}, {10, 20, 30}, {5, 6, 7}}
			got, err := s.expected(ins)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s root %d: got %v, %v; want %v", tc.coll, tc.root, got, err, tc.want)
			}
			continue
		}
		got, err := s.expected(ins)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s root %d peers %v inplace %v: got %v, %v; want %v", tc.coll, tc.root, tc.peers, tc.inplace, got, err, tc.want)
		}
		for r := range ins {
			want := int64(0)
			if tc.at != nil {
				want = tc.at[r]
			}
			if a := s.outAt(r); a != want {
				t.Errorf("%s: outAt(%d) = %d, want %d", tc.coll, r, a, want)
			}
		}
	}
	bad := &sim{p: &ir.Plan{Collective: ir.SendRecv, Peers: []int{1, 1, 0}, GPUs: make([]ir.GPU, 3)}, opt: Options{DType: U8}, in: 4, out: 4}
	if err := bad.checkSizes(); err == nil {
		t.Errorf("checkSizes accepted a peer map that is not a permutation")
	}
	bad = &sim{p: &ir.Plan{Collective: ir.Gather, Root: 3, GPUs: make([]ir.GPU, 3)}, opt: Options{DType: U8}, in: 4, out: 12}
	if err := bad.checkSizes(); err == nil {
		t.Errorf("checkSizes accepted root 3 of 3 ranks")
	}
}
