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
	return SelectPlanNodes(path, collective, ranks, ranks, size)
}

// SelectPlanNodes is SelectPlan for a world of ranks spread over nodes of
// ranksPerNode ranks each, rank r on node r / ranksPerNode
// (topo.RanksPerNode checks a job's placement and gives the number). The
// table is keyed on both: with ranksPerNode = ranks it is SelectPlan (rows
// for one node); with fewer, only rows for several nodes match (their
// ranks_per_node and nodes ranges hold the world), so a plan whose memory
// channels would cross nodes is never chosen.
func SelectPlanNodes(path, collective string, ranks, ranksPerNode int, size int64) (*Plan, error) {
	if size <= 0 {
		return nil, fmt.Errorf("message size must be positive, got %d", size)
	}
	if ranks < 1 || ranksPerNode < 1 || ranksPerNode > ranks || ranks%ranksPerNode != 0 {
		return nil, fmt.Errorf("%d ranks at %d per node: want 1 <= ranks per node <= ranks, dividing ranks", ranks, ranksPerNode)
	}
	defs := map[string]int64{"ranks": int64(ranks)}
	world := fmt.Sprintf("%d ranks", ranks)
	if ranksPerNode < ranks {
		defs["gpus_per_node"] = int64(ranksPerNode)
		world = fmt.Sprintf("%d ranks (%d nodes of %d)", ranks, ranks/ranksPerNode, ranksPerNode)
	}
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
	return nil, fmt.Errorf("%s: no %s plan for %s covers %d bytes", path, collective, world, size)
}
