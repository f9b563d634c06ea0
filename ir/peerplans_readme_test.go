package ir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPeerPlansReadme keeps testdata/peer-plans/README.md true: each
// fixture has a table row whose collective, ranks, protocol and size rule
// are what the plan now says, and a line giving the rule's reason. The
// README's verdicts rest on those rules (they name the sizes the proofs
// ran at), so a change to the rule derivation must come with a review of
// the README.
func TestPeerPlansReadme(t *testing.T) {
	const dir = "../testdata/peer-plans/"
	data, err := os.ReadFile(dir + "README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	rows := map[string][]string{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[strings.Trim(cells[0], "`")] = cells
	}
	files, err := filepath.Glob(dir + "*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		p := loadFixture(t, f)
		rule, err := p.SizeRule()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		row, ok := rows[name]
		delete(rows, name)
		if !ok {
			t.Errorf("README.md has no row for %s", name)
			continue
		}
		want := []string{"`" + name + "`", string(p.Collective), strconv.Itoa(len(p.GPUs)), string(p.Protocol), rule.String()}
		if len(row) < len(want) {
			t.Errorf("%s: row has %d cells, want at least %d", name, len(row), len(want))
			continue
		}
		for i, w := range want {
			if row[i] != w {
				t.Errorf("%s: README.md says %q, the plan %q (update the row)", name, row[i], w)
			}
		}
		why := false
		for _, l := range lines {
			if strings.HasPrefix(l, "- ") && strings.Contains(l, "`"+name+"`") && strings.Contains(l, rule.Why()) {
				why = true
			}
		}
		if !why {
			t.Errorf("README.md has no line naming %s with its rule's reason %q", name, rule.Why())
		}
	}
	for name := range rows {
		t.Errorf("README.md has a row for %s, which is not a fixture", name)
	}
}
