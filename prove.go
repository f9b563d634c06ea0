package msccl

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// proofs caches verdicts by the hash of the encoded plan: selection and
// compilation happen per call site and per size bucket, and a proof costs
// milliseconds to seconds, so the second request for the same plan must
// cost only the hash.
var proofs sync.Map // [32]byte -> error (nil: proven)

// proofsRun counts the proofs Prove actually ran (not answered from the
// cache), so tests can tell that a second request cost only the hash.
var proofsRun atomic.Int64

// Prove runs the CPU proof of p over every message size its rule admits
// (compiler.ProofSizes, compiler.ProofLaunches launches) and returns nil
// when it is correct, or an error listing the findings. A plan whose
// reduce_op fixes one reduction (`reduce ... op max`, `option reduce =
// max`) is proven for that one only, and every run path refuses the others
// (ir.Plan.FixedReduce, RunReduce); one that fixes two serves none and is
// not proven. sm may be nil
// (plans loaded from JSON); findings then name plan paths. Verdicts are
// cached by plan content.
func Prove(p *Plan, sm *compiler.SourceMap) error {
	key, err := planKey(p)
	if err != nil {
		return err
	}
	return proveKeyed(p, sm, key)
}

// planKey is the hash of p's JSON, which the caches are keyed by.
func planKey(p *Plan) ([32]byte, error) {
	data, err := ir.Encode(p)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(data), nil
}

func proveKeyed(p *Plan, sm *compiler.SourceMap, key [32]byte) error {
	if v, ok := proofs.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	var perr error
	proofsRun.Add(1)
	if ds := compiler.Verify(p, sm, nil, []cpu.DType{cpu.F32}); ds.HasErrors() {
		perr = fmt.Errorf("plan %q is not proven correct:\n%w", p.Name, ds.Err())
	}
	proofs.Store(key, perr)
	return perr
}

// Consistency says whether every rank of a plan receives bit-identical
// values for every element the collective defines, and whether the
// reduction order is fixed whatever the timing (docs/consistency.md).
// Err is nil when both hold; String is the line msccl-compile compile
// prints.
type Consistency = cpu.Consistency

// ProveOptions are ProveWith's.
type ProveOptions struct {
	// RequireConsistent refuses a proven plan that is not rank-consistent
	// or whose reduction order is not fixed, with the message of
	// msccl-compile compile --require-consistent; it also checks plans
	// above compiler.ConsistencyMaxRanks ranks, which are otherwise left
	// unchecked.
	RequireConsistent bool
}

// consistencies caches rank-consistency verdicts by plan content, as
// proofs does: the check runs the plan again with reduction trees.
var consistencies sync.Map // [32]byte -> *Consistency

// ProveWith is Prove that also says whether p is rank-consistent. c is
// nil when p is not proven (err says why), and, when o does not require
// consistency, for a plan of more than compiler.ConsistencyMaxRanks ranks
// or one whose check could not run (a proven plan: err is nil).
// With o.RequireConsistent, a proven plan that is not rank-consistent
// comes back with c and an error naming the two output bytes that differ
// (or the switch reduction, or the timing). Verdicts are cached by plan
// content.
func ProveWith(p *Plan, sm *SourceMap, o ProveOptions) (c *Consistency, err error) {
	key, err := planKey(p)
	if err != nil {
		return nil, err
	}
	if err := proveKeyed(p, sm, key); err != nil {
		return nil, err
	}
	c, err = consistencyOf(p, key, o.RequireConsistent)
	switch {
	case err != nil && o.RequireConsistent:
		return nil, fmt.Errorf("plan %q: cannot check rank consistency: %w", p.Name, err)
	case err != nil || c == nil:
		// As msccl-compile compile: proven, consistency unknown.
		return nil, nil
	}
	if cerr := c.Err(); cerr != nil && o.RequireConsistent {
		return c, fmt.Errorf("plan %q: %w", p.Name, cerr)
	}
	return c, nil
}

// consistencyOf is compiler.Consistency cached by plan content, or nil
// when p is past compiler.ConsistencyMaxRanks and require is not set.
func consistencyOf(p *Plan, key [32]byte, require bool) (*Consistency, error) {
	if !require && len(p.GPUs) > compiler.ConsistencyMaxRanks {
		return nil, nil
	}
	if v, ok := consistencies.Load(key); ok {
		return v.(*Consistency), nil
	}
	c, err := compiler.Consistency(p)
	if err != nil {
		return nil, err
	}
	consistencies.Store(key, c)
	return c, nil
}
