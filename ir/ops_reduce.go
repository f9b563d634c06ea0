package ir

import (
	"fmt"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// FixedReduce says which reductions p serves. A reducing op whose
// reduce_op is absent or "sum" (upstream's default) applies the run's
// reduction; one that names min, max or prod applies that one whatever the
// run asks. So a plan with no such op serves every reduction (ReduceNone),
// and one whose fixed ops all name r serves r alone: run with r, its other
// ops apply r too, and with any other reduction they would not match. A
// plan whose ops fix two different reductions serves none: the error
// names two of them.
func (p *Plan) FixedReduce() (ReduceOp, error) {
	// Every launch asks (RunReduce), and the walk below spells each op's
	// position: a plan with no op that fixes a reduction, nearly every
	// plan, is answered by a walk that spells nothing.
	if !p.fixesReduce() {
		return ReduceNone, nil
	}
	fixed, where := ReduceNone, ""
	var err error
	var walk func(ops []Op, at string)
	walk = func(ops []Op, at string) {
		for i := range ops {
			op := &ops[i]
			path := fmt.Sprintf("%s[%d]", at, i)
			if op.Code == OpPipeline {
				walk(op.Ops(), path+".ops")
				continue
			}
			red := op.ReduceOp()
			if err != nil || !op.Info().Reduces || red == ReduceNone || red == ReduceSum {
				continue
			}
			if fixed == ReduceNone {
				fixed, where = red, path
			} else if red != fixed {
				err = diag.Errorc(diag.CodeBadOptions, "the plan serves no reduction: %s fixes reduce_op %s, %s fixes %s", where, fixed, path, red)
			}
		}
	}
	for r := range p.GPUs {
		for b := range p.GPUs[r].ThreadBlocks {
			walk(p.GPUs[r].ThreadBlocks[b].Ops, fmt.Sprintf("gpus[%d].threadblocks[%d].ops", r, b))
		}
	}
	if err != nil {
		return ReduceNone, err
	}
	return fixed, nil
}

// fixesReduce reports whether an op of p names min, max or prod.
func (p *Plan) fixesReduce() bool {
	var walk func(ops []Op) bool
	walk = func(ops []Op) bool {
		for i := range ops {
			op := &ops[i]
			if op.Code == OpPipeline {
				if walk(op.Ops()) {
					return true
				}
				continue
			}
			if red := op.ReduceOp(); op.Info().Reduces && red != ReduceNone && red != ReduceSum {
				return true
			}
		}
		return false
	}
	for r := range p.GPUs {
		for b := range p.GPUs[r].ThreadBlocks {
			if walk(p.GPUs[r].ThreadBlocks[b].Ops) {
				return true
			}
		}
	}
	return false
}

// RunReduce is the reduction a run of p applies when asked for red:
// ReduceNone asks for the plan's own (its fixed reduction, or sum when it
// serves every one). A reduction the plan does not serve is refused with
// an error coded exec.options that names the one it does; every executor
// and entry point asks this, so they refuse alike.
func (p *Plan) RunReduce(red ReduceOp) (ReduceOp, error) {
	fixed, err := p.FixedReduce()
	if err != nil {
		return red, err
	}
	switch {
	case red == ReduceNone && fixed == ReduceNone:
		return ReduceSum, nil
	case red == ReduceNone:
		return fixed, nil
	case fixed != ReduceNone && red != fixed:
		return red, diag.Errorc(diag.CodeBadOptions, "plan %q serves reduction %s only (its reduce_op), not %s", p.Name, fixed, red)
	}
	return red, nil
}

// Reductions says in words which reductions p serves, for proof
// summaries: "every reduction", "reduction max only", or why none.
func (p *Plan) Reductions() string {
	fixed, err := p.FixedReduce()
	switch {
	case err != nil:
		return err.Error()
	case fixed == ReduceNone:
		return "every reduction"
	}
	return fmt.Sprintf("reduction %s only", fixed)
}
