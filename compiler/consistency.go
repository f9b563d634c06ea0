package compiler

import (
	"fmt"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// ConsistencyMaxRanks bounds the worlds a proof checks rank consistency
// for unasked (msccl-compile compile, msccl.VerifyPlan, msccl.ProveWith):
// the check grows with the op count (1-3 s at 128 ranks of the ring on
// two cores, n² in the ranks), so larger plans are checked only when a
// caller requires a consistent plan.
const ConsistencyMaxRanks = 128

// Consistency says whether every rank of p receives bit-identical values
// for every element the collective defines, and whether the reduction
// order is fixed whatever the timing (cpu.CheckConsistency). It runs the
// two smallest sizes the proof runs at, two launches each: an element's
// reduction tree is decided by the ops that touch its chunk, which are
// the same at every admitted size (ProofSizes says why), and two launches
// cover both halves of a double scratch. The answer is meant for a plan
// Verify proved.
func Consistency(p *ir.Plan) (*cpu.Consistency, error) {
	sizes, err := ProofSizes(p)
	if err != nil {
		return nil, err
	}
	if len(sizes) > 2 {
		sizes = sizes[:2]
	}
	c, err := cpu.CheckConsistency(p, sizes, 2)
	if err != nil {
		return nil, fmt.Errorf("checking rank consistency: %w", err)
	}
	return c, nil
}

// RequireConsistent is nil when p is rank-consistent with a fixed order,
// and otherwise an error that names two elements that differ (or the
// switch reduction): for `consistent: true` rows of a selection table.
func RequireConsistent(p *ir.Plan) error {
	c, err := Consistency(p)
	if err != nil {
		return err
	}
	return c.Err()
}
