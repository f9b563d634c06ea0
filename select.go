package msccl

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/internal/diag"
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
	return selectPlan(path, collective, ranks, ranksPerNode, size, false)
}

// SelectPlanStaged is SelectPlan for a communicator, which runs a size
// outside a plan's rule staged at the next size the rule admits, each
// rank's pieces padded (capi): the row covering size is chosen as long
// as its plan admits some size at or above it.
func SelectPlanStaged(path, collective string, ranks int, size int64) (*Plan, error) {
	return selectPlan(path, collective, ranks, ranks, size, true)
}

func selectPlan(path, collective string, ranks, ranksPerNode int, size int64, staged bool) (*Plan, error) {
	if size <= 0 {
		return nil, diag.Errorc(diag.CodeSizeRefused, "message size must be positive, got %d", size)
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
	sel, err := selectionFor(path, defs)
	if err != nil {
		return nil, err
	}
	if path == "" {
		path = "algorithms/" + algorithms.Selection + " (embedded)"
	}
	s := uint64(size)
	if staged {
		// Below every row of the collective: the smallest row serves it
		// padded up to its minimum.
		low := uint64(math.MaxUint64)
		for _, np := range sel.plans {
			if string(np.Plan.Collective) == collective {
				low = min(low, np.Plan.MinMessageSize)
			}
		}
		if s < low && low != math.MaxUint64 {
			s = low
		}
	}
	for i, np := range sel.plans {
		p := np.Plan
		if string(p.Collective) != collective || s < p.MinMessageSize {
			continue
		}
		if s < p.MaxMessageSize || p.MaxMessageSize == math.MaxUint64 {
			rule, err := p.SizeRule()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", np.Algorithm, err)
			}
			if _, ok := rule.Next(size); staged && ok {
				// Served padded: Next admits size itself or the next size.
			} else if err := rule.Check(size); err != nil {
				return nil, fmt.Errorf("%s: %w", np.Algorithm, err)
			}
			if err := sel.prove(i); err != nil {
				return nil, err
			}
			// The cached plan stays the one proven: the caller gets a copy.
			return p.Clone(), nil
		}
	}
	return nil, diag.Errorc(diag.CodeSizeRefused, "%s: no %s plan for %s covers %d bytes", path, collective, world, size)
}

// selections caches a selection table's compiled rows per world, with
// each row's verdict, so that the second SelectPlan for a world compiles
// and proves nothing (a collective call site selects per call; compiling
// every row costs a tenth of a second at 8 ranks and seconds at 128).
// The key holds the table's path, the world and, for a table on disk, a
// hash of the table and of the programs beside it, so an edited file is
// compiled again.
var selections sync.Map // string -> *selection

type selection struct {
	once  sync.Once
	plans []compiler.NamedPlan
	err   error

	mu      sync.Mutex
	verdict map[int]error // row index -> Prove's verdict
}

func selectionFor(path string, defs map[string]int64) (*selection, error) {
	key, err := selectionKey(path, defs)
	if err != nil {
		return nil, err
	}
	v, _ := selections.LoadOrStore(key, &selection{verdict: map[int]error{}})
	sel := v.(*selection)
	sel.once.Do(func() {
		if path == "" {
			sel.plans, sel.err = algorithms.Plans(defs)
		} else {
			sel.plans, sel.err = compiler.Plans(path, defs)
		}
	})
	if sel.err != nil {
		// A failure is not kept: the next call may find the files fixed.
		selections.CompareAndDelete(key, sel)
	}
	return sel, sel.err
}

// prove proves row i once per selection (Prove caches by the plan's
// encoding too; this spares even the encoding).
func (s *selection) prove(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, ok := s.verdict[i]; ok {
		return err
	}
	err := Prove(s.plans[i].Plan, s.plans[i].Source)
	s.verdict[i] = err
	return err
}

// selectionKey names a table and a world; for a table on disk it hashes
// the table and every program in its directory (rows name programs
// there).
func selectionKey(path string, defs map[string]int64) (string, error) {
	names := make([]string, 0, len(defs))
	for k := range defs {
		names = append(names, k)
	}
	sort.Strings(names)
	world := ""
	for _, k := range names {
		world += fmt.Sprintf("%s=%d,", k, defs[k])
	}
	if path == "" {
		return "embedded|" + world, nil
	}
	h := sha256.New()
	table, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	h.Write(table)
	progs, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.msccl"))
	for _, f := range progs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the compiler reports it if a row needs it
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(f), len(data))
		h.Write(data)
	}
	return fmt.Sprintf("%s|%s|%x", path, world, h.Sum(nil)), nil
}
