package compiler

import (
	"github.com/msccl-go/msccl-go/ir"
)

// How many blocks the automatic assignment needs is only known once sync
// has run: the ops a block ends with are mostly the waits, signals and
// nops inserted for its data ops, and they depend on which blocks its
// partners are on. So fitBlocks compiles trials: it places the ops, runs
// the passes after assign-tbs on a copy of the actions, measures every
// automatic block of the plan against the executor's limits and, for the
// groups whose blocks overflow, lowers the number of ops per block in
// proportion to the excess. The first trial is the unsplit assignment,
// so a program that fits compiles exactly as it would without this.

// maxFitTrials bounds the trial compilations; each shrinks the budgets
// of the overflowing groups at least by one op, most by the excess.
const maxFitTrials = 6

// fitMargin leaves room below the limit: splitting a group adds the
// synchronisation between its new blocks.
const fitMargin = 0.85

// trialPasses is the pipeline trials run, set at init: a reference from
// here to passes would be an initialization cycle (passes names
// assignTBs).
var trialPasses []pass

func init() { trialPasses = passes }

// fitBlocks returns the per-group op budgets for placeTBs: nil when no op
// is placed automatically, empty when the unsplit assignment fits.
func fitBlocks(st *state, p *program) map[tbGroup]int {
	auto := false
	for _, a := range p.actions {
		auto = auto || a.tbHint < 0
	}
	if !auto || p.explicit {
		return nil
	}
	budget := map[tbGroup]int{}
	for trial := 0; trial < maxFitTrials; trial++ {
		over := trialBlocks(st, p, budget)
		changed := false
		for g, b := range over {
			if cur, ok := budget[g]; !ok || b < cur {
				budget[g] = b
				changed = true
			}
		}
		if !changed {
			break // fits, or nothing left to split: limits reports the rest
		}
	}
	return budget
}

// trialBlocks compiles the program's actions with the given budgets up to
// the finished plan and returns a smaller budget for every group with a
// block over the limits. It returns nil when the plan fits or the trial
// fails for another reason (the real passes report that).
func trialBlocks(st *state, p *program, budget map[tbGroup]int) map[tbGroup]int {
	t := st.sub()
	t.opts = Options{MaxOps: st.opts.MaxOps}
	tp := &program{hdr: p.hdr, explicit: p.explicit, actions: make([]*action, len(p.actions))}
	for i, a := range p.actions {
		tp.actions[i] = a.instance(1, 0) // a deep copy: later passes rewrite actions
	}
	groupOf, groups := placeTBs(t, tp, budget)
	compactBlocks(t, tp)
	// blockGroup[r][tb] is the group of rank r's dense block tb (-1: a
	// `tb N` block), size its op count before sync.
	n := tp.hdr.ranks
	blockGroup, size := make([][]int32, n), make([][]int, n)
	for r := range blockGroup {
		blockGroup[r] = make([]int32, len(tp.blocks[r]))
		size[r] = make([]int, len(tp.blocks[r]))
		for i := range blockGroup[r] {
			blockGroup[r][i] = -1
		}
	}
	for i, a := range tp.actions {
		size[a.rank][a.tb]++
		if groupOf[i] >= 0 {
			blockGroup[a.rank][a.tb] = groupOf[i]
		}
	}
	after := false
	var v any = tp
	for _, ps := range trialPasses {
		if ps.name == "limits" {
			break
		}
		if after {
			v = ps.run(t, v)
			if t.diags.HasErrors() {
				return nil
			}
		}
		after = after || ps.name == placerPass
	}
	b, _ := v.(*built)
	if b == nil {
		return nil
	}
	plan := b.plan
	// Option instances makes block tb into blocks tb*I .. tb*I+I-1.
	I := max(p.hdr.instances, 1)
	over := map[tbGroup]int{}
	for r := range plan.GPUs {
		for b := range plan.GPUs[r].ThreadBlocks {
			tb := &plan.GPUs[r].ThreadBlocks[b]
			d := b / I
			if r >= n || d >= len(blockGroup[r]) || blockGroup[r][d] < 0 {
				continue
			}
			load := blockLoad(tb)
			k := size[r][d]
			if load <= 1 || k <= 1 {
				continue // fits, or one op that no split can shrink
			}
			nb := min(max(int(float64(k)/load*fitMargin), 1), k-1)
			g := groups[blockGroup[r][d]]
			if cur, ok := over[g]; !ok || nb < cur {
				over[g] = nb
			}
		}
	}
	return over
}

// blockLoad is a block's use of the executor's per-block tables as a
// fraction of their capacity, the fullest one: above 1 it does not fit.
func blockLoad(tb *ir.ThreadBlock) float64 {
	ops := 0
	for i := range tb.Ops {
		ops++
		if tb.Ops[i].Code == ir.OpPipeline {
			ops += len(tb.Ops[i].Ops())
		}
	}
	load := float64(ops) / ir.MaxOpsPerBlock
	var chans, remote [8]int
	for _, c := range tb.Channels {
		if int(c.Type) < len(chans) {
			chans[c.Type] += len(c.ChannelIDs)
		}
	}
	for _, rr := range tb.RemoteBufferRefs {
		if int(rr.AccessChannelType) < len(remote) {
			remote[rr.AccessChannelType] += len(rr.RemoteBufferIDs)
		}
	}
	for i := range chans {
		load = max(load, float64(chans[i])/ir.MaxChannelsPerBlock, float64(remote[i])/ir.MaxRemoteBuffersPerBlock)
	}
	return load
}
