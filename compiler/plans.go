package compiler

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
	"gopkg.in/yaml.v3"
)

// SelectionRow is one row of algorithms/selection.yaml.
type SelectionRow struct {
	Collective   string           `yaml:"collective"`
	Ranks        []int64          `yaml:"ranks"`
	RanksPerNode []int64          `yaml:"ranks_per_node"`
	Nodes        []int64          `yaml:"nodes"`
	MultiNode    bool             `yaml:"multi_node"`
	MinSize      string           `yaml:"min_message_size"`
	MaxSize      string           `yaml:"max_message_size"`
	Algorithm    string           `yaml:"algorithm"`
	Defines      map[string]int64 `yaml:"defines"`
	// Consistent demands a rank-consistent plan (Consistency): every
	// rank receives bit-identical values, in an order fixed whatever
	// the timing. A row whose plan is not is refused, naming two
	// elements that differ.
	Consistent bool `yaml:"consistent"`
	Line       int  `yaml:"-"`
}

// NamedPlan is one compiled row of a selection table.
type NamedPlan struct {
	Name      string // file-friendly: collective_algorithm_min-max
	Algorithm string // path of the .msccl file
	Row       SelectionRow
	Plan      *ir.Plan
	Source    *SourceMap
}

// loadSelection reads and checks a selection table.
func loadSelection(path string) ([]SelectionRow, error) {
	return loadSelectionFS(osFS{}, path)
}

// osFS reads the host's files by their own paths (relative to the working
// directory or absolute), which os.DirFS cannot take.
type osFS struct{}

func (osFS) Open(name string) (fs.File, error) { return os.Open(name) }

// loadSelectionFS reads and checks the selection table at path in fsys
// (the algorithms package embeds the library's).
func loadSelectionFS(fsys fs.FS, path string) ([]SelectionRow, error) {
	data, err := fs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty selection table", path)
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s:%d: the table must be a list of rows", path, seq.Line)
	}
	var rows []SelectionRow
	for _, n := range seq.Content {
		var row SelectionRow
		if err := n.Decode(&row); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n.Line, err)
		}
		if err := checkRowKeys(n); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n.Line, err)
		}
		row.Line = n.Line
		if row.Collective == "" || row.Algorithm == "" {
			return nil, fmt.Errorf("%s:%d: a row needs collective and algorithm", path, n.Line)
		}
		for _, r := range [][]int64{row.Ranks, row.RanksPerNode, row.Nodes} {
			if r != nil && (len(r) != 2 || r[0] > r[1]) {
				return nil, fmt.Errorf("%s:%d: ranks, ranks_per_node and nodes are [min, max]", path, n.Line)
			}
		}
		if _, err := size.ParseBound(row.MinSize, 0); err != nil {
			return nil, fmt.Errorf("%s:%d: min_message_size: %w", path, n.Line, err)
		}
		if _, err := size.ParseBound(row.MaxSize, math.MaxUint64); err != nil {
			return nil, fmt.Errorf("%s:%d: max_message_size: %w", path, n.Line, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

var rowKeys = []string{"collective", "ranks", "ranks_per_node", "nodes", "multi_node", "min_message_size", "max_message_size", "algorithm", "defines", "consistent"}

func checkRowKeys(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("a row must be a mapping")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if !contains(rowKeys, k) {
			return fmt.Errorf("unknown key %q%s", k, " ("+joinDetail(diag.Suggest(k, rowKeys), "keys: "+strings.Join(rowKeys, ", "))+")")
		}
	}
	return nil
}

func inRange(r []int64, v int64) bool { return r == nil || (v >= r[0] && v <= r[1]) }

// Plans compiles one plan per row of the selection table at selPath that
// matches the world given by defines (ranks, and gpus_per_node/nodes for
// several nodes), with min/max_message_size set from the row. Defines are
// passed to each algorithm only where it declares the param.
func Plans(selPath string, defines map[string]int64) ([]NamedPlan, error) {
	return PlansFS(osFS{}, selPath, defines)
}

// PlansFS is Plans over a file system (the selection table and the
// algorithms next to it, read from fsys).
func PlansFS(fsys fs.FS, selPath string, defines map[string]int64) ([]NamedPlan, error) {
	rows, err := loadSelectionFS(fsys, selPath)
	if err != nil {
		return nil, err
	}
	ranks, ok := defines["ranks"]
	if !ok {
		return nil, fmt.Errorf("plans needs the world size: -D ranks=N")
	}
	perNode := ranks
	if g, ok := defines["gpus_per_node"]; ok {
		perNode = g
	} else if n, ok := defines["nodes"]; ok && n > 0 {
		perNode = ranks / n
	}
	multi := perNode < ranks
	var out []NamedPlan
	for _, row := range rows {
		if row.MultiNode != multi || !inRange(row.Ranks, ranks) || !inRange(row.RanksPerNode, perNode) || !inRange(row.Nodes, ranks/perNode) {
			continue
		}
		path := filepath.Join(filepath.Dir(selPath), row.Algorithm)
		if _, host := fsys.(osFS); !host {
			path = pathpkg.Join(pathpkg.Dir(selPath), row.Algorithm) // fs.FS paths are slash-separated
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", selPath, row.Line, err)
		}
		f, ds := dsl.Parse(path, src)
		if ds.HasErrors() {
			return nil, fmt.Errorf("%s:%d: %s", selPath, row.Line, ds.Err())
		}
		defs := map[string]int64{}
		declared := declaredParams(f)
		for k, v := range defines {
			if declared[k] {
				defs[k] = v
			}
		}
		if multi && declared["nodes"] && declared["gpus_per_node"] {
			defs["nodes"], defs["gpus_per_node"] = ranks/perNode, perNode
		}
		for k, v := range row.Defines {
			defs[k] = v
		}
		p, sm, ds := Compile(f, defs, Options{})
		if ds.HasErrors() {
			return nil, fmt.Errorf("%s:%d: %s: %w", selPath, row.Line, row.Algorithm, ds.Err())
		}
		if string(p.Collective) != row.Collective {
			return nil, fmt.Errorf("%s:%d: %s implements %s, not %s", selPath, row.Line, row.Algorithm, p.Collective, row.Collective)
		}
		if row.Consistent {
			if err := RequireConsistent(p); err != nil {
				return nil, fmt.Errorf("%s:%d: %s at %d ranks: the row demands consistent: true, but %w", selPath, row.Line, row.Algorithm, ranks, err)
			}
		}
		// The row's range narrows the plan's own size rule, never widens it.
		rowMin, _ := size.ParseBound(row.MinSize, 0)
		p.MinMessageSize = max(rowMin, p.MinMessageSize)
		p.MaxMessageSize, _ = size.ParseBound(row.MaxSize, math.MaxUint64)
		algo := strings.TrimSuffix(filepath.Base(row.Algorithm), ".msccl")
		p.Name = fmt.Sprintf("%s_%s_%s", algo, sizeName(rowMin), sizeName(p.MaxMessageSize))
		out = append(out, NamedPlan{Name: p.Name, Algorithm: path, Row: row, Plan: p, Source: sm})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no row matches %d ranks with %d per node", selPath, ranks, perNode)
	}
	return out, nil
}

func declaredParams(f *dsl.File) map[string]bool {
	m := map[string]bool{}
	for _, s := range f.Stmts {
		if s.Param != nil {
			m[s.Param.Name] = true
		}
	}
	return m
}

func sizeName(n uint64) string {
	switch {
	case n == math.MaxUint64:
		return "inf"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}
