package msccl

import (
	"fmt"
	"math"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
)

// SelectPlan compiles the library plan that the selection table at path
// (algorithms/selection.yaml; "" for the library embedded in the program,
// which works from any directory) names for a collective ("allreduce", ...) on
// ranks GPUs of one node at a message of size bytes (as nccl-tests counts
// them). A row covers [min_message_size, max_message_size). The plan is
// proven (Prove, cached) and size checked against its rule before it is
// returned.
func SelectPlan(path, collective string, ranks int, size int64) (*Plan, error) {
	if size <= 0 {
		return nil, fmt.Errorf("message size must be positive, got %d", size)
	}
	defs := map[string]int64{"ranks": int64(ranks)}
	var plans []compiler.NamedPlan
	var err error
	if path == "" {
		path = "algorithms/" + algorithms.Selection + " (embedded)"
		plans, err = algorithms.Plans(defs)
	} else {
		plans, err = compiler.Plans(path, defs)
	}
	if err != nil {
		return nil, err
	}
	s := uint64(size)
	for _, np := range plans {
		p := np.Plan
		if string(p.Collective) != collective || s < p.MinMessageSize {
			continue
		}
		if s < p.MaxMessageSize || p.MaxMessageSize == math.MaxUint64 {
			rule, err := p.SizeRule()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", np.Algorithm, err)
			}
			if err := rule.Check(size); err != nil {
				return nil, fmt.Errorf("%s: %w", np.Algorithm, err)
			}
			if err := Prove(p, np.Source); err != nil {
				return nil, err
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s: no %s plan for %d ranks covers %d bytes", path, collective, ranks, size)
}
