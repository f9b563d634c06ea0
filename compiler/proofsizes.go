package compiler

import (
	"slices"

	"github.com/msccl-go/msccl-go/ir"
)

// ProofLaunches is how many back-to-back launches a proof simulates. With
// double scratch a rank can run up to two launches ahead of a peer, so
// launch k must be ordered against k+1 and k+2; the plan is the same every
// launch and alternates scratch halves, so what can happen between
// launches k and k+d depends only on d and the parity of k, and ordering
// every pair at d = 1 and 2 orders all of them (induction over the period
// of the bytes). Four launches hold d = 1, 2 at both parities
// (docs/rationale.md, "Why four launches prove any number").
const ProofLaunches = 4

// ProofSizes returns the message sizes a proof of p runs at so that it
// covers every size p's rule admits (docs/rationale.md, "Why a few sizes
// prove all of them"): at admitted sizes every op relabels whole chunks,
// so the schedule's dataflow, races and deadlocks depend on chunk indices
// only, and any one admitted size decides them — unless an op cuts chunks
// finer (tbg_info splits a chunk range across blocks, a pipeline walks it
// in windows), where the cuts fall depends on the chunk lengths.
// The set is: the smallest size, the next one, the first and the last
// other admitted residue class of the chunk split (every class when ops
// cut chunks, up to maxClasses), and a mid-sized one (64 KiB rounded up to
// the rule) so that realistic lengths are simulated too.
func ProofSizes(p *ir.Plan) ([]int64, error) {
	rule, err := p.SizeRule()
	if err != nil {
		return nil, err
	}
	var out []int64
	add := func(s int64) {
		if n, ok := rule.Next(s); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	add(rule.Min)
	add(rule.Min + rule.Granularity)
	// Residue classes: the reference buffer of N chunks with u units,
	// u = N + k*Step for each admitted residue k*Step.
	refBytes := func(units int64) int64 { return units * rule.Align * rule.RefMul / rule.RefDiv }
	classes := rule.Chunks / rule.Step
	cuts := cutsChunks(p)
	// One residue class besides 0 and the last suffices where ops keep
	// whole chunks (the argument above); chunk-cutting plans get all.
	limit := int64(1)
	if cuts {
		limit = maxClasses
	}
	for k := int64(1); k < classes && k <= limit; k++ {
		add(refBytes(rule.Chunks + k*rule.Step))
		if cuts {
			add(refBytes(2*rule.Chunks + k*rule.Step))
		}
	}
	if classes > limit+1 {
		add(refBytes(rule.Chunks + (classes-1)*rule.Step))
	}
	add(64 << 10)
	slices.Sort(out)
	return out, nil
}

// maxClasses caps the residue classes a proof of a chunk-cutting plan
// walks; plans with more chunks than this are proven at a sample.
const maxClasses = 32

// cutsChunks reports whether some op of p splits chunk ranges below chunk
// granularity (tbg_info, pipelines).
func cutsChunks(p *ir.Plan) bool {
	for r := range p.GPUs {
		for b := range p.GPUs[r].ThreadBlocks {
			for i := range p.GPUs[r].ThreadBlocks[b].Ops {
				op := &p.GPUs[r].ThreadBlocks[b].Ops[i]
				if op.Code == ir.OpPipeline || op.TBG() != nil {
					return true
				}
			}
		}
	}
	return false
}
