package ir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
)

// TestBrokenPlans loads every plan under testdata/broken/ir and compares
// the diagnostics with the .want file beside it. Every broken plan must
// draw at least one error: a file that loads cleanly tests nothing.
func TestBrokenPlans(t *testing.T) {
	files, err := filepath.Glob("../testdata/broken/ir/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no broken plans: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, ds, err := Load(data)
			if err == nil || p != nil {
				t.Errorf("Load accepted a broken plan:\n%s", ds)
			}
			golden.Check(t, strings.TrimSuffix(f, ".json")+".want", []byte(ds.String()), *update)
		})
	}
}
