package ir

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
)

// TestBrokenPlans loads every plan under testdata/broken/ir and compares
// the diagnostics with the .want file beside it. Every broken plan must
// draw at least one error: a file that loads cleanly tests nothing.
func TestBrokenPlans(t *testing.T) {
	golden.Files(t, "../testdata/broken/ir/*.json", func(t *testing.T, f string, data []byte) {
		p, ds, err := Load(data)
		if err == nil || p != nil {
			t.Errorf("Load accepted a broken plan:\n%s", ds)
		}
		golden.Check(t, strings.TrimSuffix(f, ".json")+".want", []byte(ds.String()), *update)
	})
}
