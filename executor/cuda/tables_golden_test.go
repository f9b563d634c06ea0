package cudaexec

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
	"github.com/msccl-go/msccl-go/ir"
	"golang.org/x/tools/txtar"
)

var updateTables = flag.Bool("update-tables", false, "rewrite testdata/tables.sha256")

// goldenPlans are every plan the tables are held to: the upstream
// fixtures the kernel runs (not the multicast ones), each library
// algorithm as compiled in testdata/algorithms, and the symbolic-proof
// plans of testdata/symbolic (other rank counts).
func goldenPlans(t *testing.T) map[string]*ir.Plan {
	t.Helper()
	plans := map[string]*ir.Plan{}
	for _, f := range planFiles(t) {
		plans["peer-plans/"+filepath.Base(f)] = loadPlan(t, f)
	}
	sym, _ := filepath.Glob("../../testdata/symbolic/*.json")
	for _, f := range sym {
		plans["symbolic/"+filepath.Base(f)] = loadPlan(t, f)
	}
	algs, _ := filepath.Glob("../../testdata/algorithms/*.txtar")
	for _, f := range algs {
		ar, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range ar.Files {
			if fl.Name != "plan.json" {
				continue
			}
			p, ds := ir.Decode(fl.Data)
			if ds.HasErrors() {
				t.Fatalf("%s: %v", f, ds)
			}
			plans["algorithms/"+filepath.Base(f)] = p
		}
	}
	if len(plans) < 40 {
		t.Fatalf("only %d plans to hold the tables to", len(plans))
	}
	return plans
}

// TestTablesGolden holds the device tables of every plan goldenPlans
// lists, at two sizes and under two run reductions, to a SHA-256 of their
// encoded bytes (testdata/tables.sha256): a change to how ops are
// resolved (ir's op table, the port and packet rules) must leave what the
// kernel reads byte for byte as it was, or show here. Rewrite the file
// with -update-tables only for a change meant to alter the tables.
func TestTablesGolden(t *testing.T) {
	plans := goldenPlans(t)
	names := make([]string, 0, len(plans))
	for n := range plans {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		p := plans[name]
		if err := checkPlan(p, false); err != nil {
			// Multicast plans never reach the builder: the refusal is
			// their golden line.
			if ir.ErrorCode(err) != ir.CodeUnsupported {
				t.Errorf("%s: %v", name, err)
			}
			fmt.Fprintf(&b, "unsupported %s\n", name)
			continue
		}
		rule, err := p.SizeRule()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, size := range []int64{rule.Min, rule.Min + 37*rule.Granularity, 1 << 20} {
			if size%rule.Granularity != 0 {
				size += rule.Granularity - size%rule.Granularity
			}
			for _, red := range []ir.ReduceOp{ir.ReduceSum, ir.ReduceMax} {
				bs, ls, err := fakeBufs(p, size)
				if err != nil {
					t.Errorf("%s at %d bytes: %v", name, size, err)
					continue
				}
				h := sha256.New()
				for r := range p.GPUs {
					tb := &tableBuilder{p: p, rank: r, lay: ls[r], bufs: bs, reduce: red}
					tables, err := tb.build()
					if err != nil {
						t.Errorf("%s rank %d at %d bytes: %v", name, r, size, err)
						continue
					}
					for _, tab := range tables {
						enc, err := tab.Encode()
						if err != nil {
							t.Errorf("%s rank %d: %v", name, r, err)
						}
						h.Write(enc)
					}
				}
				fmt.Fprintf(&b, "%x %s %d %s\n", h.Sum(nil), name, size, red)
			}
		}
	}
	golden.Check(t, "testdata/tables.sha256", []byte(b.String()), *updateTables)
}
