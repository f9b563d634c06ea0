package cpu

import (
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// mutation is one single-point change of a plan.
type mutation struct {
	name  string
	apply func(p *ir.Plan)
}

// clonePlan deep-copies the parts of a plan mutations touch.
func clonePlan(p *ir.Plan) *ir.Plan {
	q := *p
	q.GPUs = make([]ir.GPU, len(p.GPUs))
	for r, g := range p.GPUs {
		g.ThreadBlocks = make([]ir.ThreadBlock, len(p.GPUs[r].ThreadBlocks))
		for b, tb := range p.GPUs[r].ThreadBlocks {
			tb.Ops = cloneOps(tb.Ops)
			g.ThreadBlocks[b] = tb
		}
		q.GPUs[r] = g
	}
	return &q
}

func cloneOps(ops []ir.Op) []ir.Op {
	out := make([]ir.Op, len(ops))
	for i, op := range ops {
		op.Src = append([]ir.BufRef(nil), op.Src...)
		op.Dst = append([]ir.BufRef(nil), op.Dst...)
		if body := op.Ops(); body != nil {
			op.SetOps(cloneOps(body))
		}
		out[i] = op
	}
	return out
}

// opList returns the op list holding (op, inner) of a block, a function
// that replaces that list, and the index.
func opList(p *ir.Plan, r, b, op, inner int) ([]ir.Op, func([]ir.Op), int) {
	tb := &p.GPUs[r].ThreadBlocks[b]
	if inner < 0 {
		return tb.Ops, func(ops []ir.Op) { tb.Ops = ops }, op
	}
	pipe := &tb.Ops[op]
	return pipe.Ops(), pipe.SetOps, inner
}

func isSync(c ir.OpCode) bool {
	switch c {
	case ir.OpSignal, ir.OpWait, ir.OpRlxSignal, ir.OpRlxWait, ir.OpFlush:
		return true
	}
	return false
}

// mutations lists every deletion of a signal, wait or flush (relaxed ones
// included) and every move of a remote or multicast destination index by
// one chunk.
func mutations(p *ir.Plan) []mutation {
	var ms []mutation
	visit := func(r, b, op, inner int, o *ir.Op) {
		pl := Place{Rank: r, Block: b, Op: op, Inner: inner, OpName: o.Code.String()}
		if isSync(o.Code) {
			ms = append(ms, mutation{"delete " + pl.String(), func(q *ir.Plan) {
				ops, set, i := opList(q, r, b, op, inner)
				set(append(ops[:i], ops[i+1:]...))
			}})
		}
		for k, d := range o.Dst {
			// Multicast destinations are remote too: they land on every
			// rank of the group.
			if d.Kind != ir.RefRemote && d.Kind != ir.RefSwitch {
				continue
			}
			for _, delta := range []int{-1, 1} {
				if d.Index+delta < 0 {
					continue
				}
				ms = append(ms, mutation{fmt.Sprintf("move %s dst_buff[%d] by %+d", pl, k, delta), func(q *ir.Plan) {
					ops, _, i := opList(q, r, b, op, inner)
					ops[i].Dst[k].Index += delta
				}})
			}
		}
	}
	eachOp(p, visit)
	return ms
}

// TestMutationsRejected: every single-point mutation of a sync op or a
// remote destination of every fixture must be caught (setup error or a
// report that is not clean). None is harmless in these fixtures: every
// signal feeds a wait that orders a later access, and every remote write
// lands on bytes that either another op owns or the result checks.
func TestMutationsRejected(t *testing.T) {
	plans := fixtures(t)
	// The direct plans add port channels (pws, flush) and the other
	// collectives.
	for name, p := range collectivePlans() {
		plans["direct/"+name] = p
	}
	total, setupErrs := 0, 0
	kinds := map[Verdict]int{}
	for _, name := range sortedNames(plans) {
		p := plans[name]
		for _, m := range mutations(p) {
			total++
			q := clonePlan(p)
			m.apply(q)
			size := sizes(p)[0] * 4
			rep, err := Run(q, Options{Size: size, DType: I32, Seed: 3})
			if err != nil {
				setupErrs++
				continue
			}
			kinds[rep.Verdict]++
			if clean(name, rep) {
				t.Errorf("%s: %s is not caught", name, m.name)
			}
		}
	}
	t.Logf("%d mutations: %d refused at setup, verdicts %v", total, setupErrs, kinds)
}

// clean reports whether a report shows nothing beyond the fixture's own
// known race, so that mutations of racy fixtures must add a finding.
func clean(name string, rep *Report) bool {
	op, racy := knownRacy[name]
	if !racy {
		return rep.OK()
	}
	if len(rep.Deadlocks) > 0 || len(rep.Unbalanced) > 0 || rep.WrongTotal > 0 {
		return false
	}
	for _, r := range rep.Races {
		if r.A.OpName != op && r.B.OpName != op {
			return false
		}
	}
	return true
}
