package compiler

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// TestSelectionConsistent: a selection row with consistent: true refuses
// a plan whose ranks may receive different bits (the one-shot), naming
// the row's line and two output bytes, and accepts a two-shot; without
// the key the one-shot row is accepted.
func TestSelectionConsistent(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"../testdata/consistency/allreduce_oneshot.msccl", "../algorithms/allreduce_twoshot.msccl"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	table := func(algo string, consistent bool) string {
		path := filepath.Join(dir, "selection.yaml")
		row := fmt.Sprintf("- collective: allreduce\n  ranks: [2, 16]\n  min_message_size: 0\n  max_message_size: inf\n  algorithm: %s\n", algo)
		if consistent {
			row += "  consistent: true\n"
		}
		if err := os.WriteFile(path, []byte("# test\n"+row), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	defs := map[string]int64{"ranks": 4}
	_, err := Plans(table("allreduce_oneshot.msccl", true), defs)
	if err == nil {
		t.Fatal("a consistent: true row accepted the one-shot")
	}
	for _, want := range []string{"selection.yaml:2:", "consistent: true", "rank 0 output byte 0 and rank 2 output byte 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Plans(table("allreduce_oneshot.msccl", false), defs); err != nil {
		t.Errorf("without consistent: true the one-shot row must load: %v", err)
	}
	if _, err := Plans(table("allreduce_twoshot.msccl", true), defs); err != nil {
		t.Errorf("the two-shot is rank-consistent: %v", err)
	}
}

// TestConsistencyTable regenerates the table of docs/consistency.md
// (between its markers): which library algorithms, at 2–9 ranks (the
// hierarchical ones at 2–4 nodes), which upstream fixtures of
// testdata/peer-plans and which examples of testdata/consistency are
// rank-consistent. Each verdict is witnessed on random floats
// (floatWitness). -update rewrites the table.
func TestConsistencyTable(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("| plan | worlds | every rank gets the same bits | order fixed whatever the timing |\n|---|---|---|---|\n")
	files, _ := filepath.Glob("../algorithms/*.msccl")
	examples, _ := filepath.Glob("../testdata/consistency/*.msccl")
	for _, file := range append(files, examples...) {
		src := readFile(t, file)
		var worlds, not, unfixed []string
		for _, s := range tableShapes(file) {
			p, _, ds := CompileSource(filepath.Base(file), src, s.defines(), Options{})
			if ds.HasErrors() {
				continue // the algorithm refuses this world
			}
			c, err := Consistency(p)
			if err != nil {
				t.Fatalf("%s at %s ranks: %v", file, s, err)
			}
			floatWitness(t, fmt.Sprintf("%s at %s ranks", file, s), p, c.Identical)
			w := s.String()
			worlds = append(worlds, w)
			if !c.Identical {
				not = append(not, w)
			}
			if !c.Fixed {
				unfixed = append(unfixed, w)
			}
		}
		name := strings.TrimPrefix(file, "../")
		fmt.Fprintf(&b, "| %s | %s ranks | %s | %s |\n", name, span(worlds), verdictAt(worlds, not), verdictAt(worlds, unfixed))
	}
	fixtures, _ := filepath.Glob("../testdata/peer-plans/*.json")
	for _, file := range fixtures {
		p, ds := ir.Decode(readFile(t, file))
		if ds.HasErrors() {
			t.Fatalf("%s: %v", file, ds)
		}
		c, err := Consistency(p)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		floatWitness(t, file, p, c.Identical)
		fmt.Fprintf(&b, "| %s | %d ranks | %s | %s |\n", strings.TrimPrefix(file, "../"), len(p.GPUs), yesNo(c.Identical), yesNo(c.Fixed))
	}
	replaceSection(t, "../docs/consistency.md", b.String())
}

// floatWitness runs p on random floats (f32, f16, bf16) at about 4 KiB
// and fails unless the bits agree with the claim: identical on every
// rank when the trees say so, different somewhere when they say not.
func floatWitness(t *testing.T, what string, p *ir.Plan, identical bool) {
	t.Helper()
	rule, err := p.SizeRule()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	size, ok := rule.Next(max(rule.Min, 4096))
	if !ok {
		size = rule.Min
	}
	differs := false
	for _, dt := range []cpu.DType{cpu.F32, cpu.F16, cpu.BF16} {
		got, err := cpu.CompareFloats(p, size, dt, 2, 7)
		if err != nil {
			t.Fatalf("%s, %s: %v", what, dt, err)
		}
		if identical && !got.Identical {
			t.Errorf("%s: claimed rank-consistent, but in %s at %d bytes %s", what, dt, size, got.Pair())
		}
		differs = differs || !got.Identical
	}
	if !identical && !differs {
		t.Errorf("%s: claimed not rank-consistent, but every rank got the same bits in f32, f16 and bf16 at %d bytes", what, size)
	}
}

// tableShapes are the worlds the table tries: 2–9 ranks, or for a
// hierarchical algorithm 2–4 nodes of 2 and 4 GPUs (at two nodes each
// rank adds two node partials, which commute: three show the order).
func tableShapes(file string) []shape {
	var out []shape
	if strings.Contains(file, "hierarchical") {
		for nodes := int64(2); nodes <= 4; nodes++ {
			for _, g := range []int64{2, 4} {
				out = append(out, shape{ranks: nodes * g, nodes: nodes, gpn: g})
			}
		}
		return out
	}
	for n := int64(2); n <= 9; n++ {
		out = append(out, shape{ranks: n})
	}
	return out
}

// span words a sorted list of rank counts: "2–9", or "4, 6, 8".
func span(ws []string) string {
	if len(ws) == 0 {
		return "no"
	}
	contiguous := true
	for i := 1; i < len(ws); i++ {
		var a, b int
		_, e1 := fmt.Sscan(ws[i-1], &a)
		_, e2 := fmt.Sscan(ws[i], &b)
		contiguous = contiguous && e1 == nil && e2 == nil && b == a+1
	}
	if contiguous && len(ws) > 2 {
		return ws[0] + "–" + ws[len(ws)-1]
	}
	return strings.Join(ws, ", ")
}

func verdictAt(worlds, not []string) string {
	switch {
	case len(not) == 0:
		return "yes"
	case len(not) == len(worlds):
		return "no"
	}
	return "no at " + strings.Join(not, ", ") + " ranks"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

const (
	tableBegin = "<!-- begin consistency table: go test ./compiler -run TestConsistencyTable -update -->\n"
	tableEnd   = "<!-- end consistency table -->\n"
)

// replaceSection checks that the doc at path holds body between its
// markers, or writes it there under -update.
func replaceSection(t *testing.T, path, body string) {
	t.Helper()
	doc := string(readFile(t, path))
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", path, tableBegin, tableEnd)
	}
	have := doc[i+len(tableBegin) : j]
	if have == body {
		return
	}
	if !*update {
		t.Fatalf("%s: the consistency table is stale; go test ./compiler -run TestConsistencyTable -update rewrites it. Generated:\n%s", path, body)
	}
	doc = doc[:i+len(tableBegin)] + body + doc[j:]
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}
