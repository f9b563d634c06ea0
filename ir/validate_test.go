package ir

import (
	"path/filepath"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
)

// fixtureWarnings lists the warnings that fixtures legitimately draw, by
// fixture; anything else is a validator bug.
var fixtureWarnings = map[string]string{}

func TestFixturesValidate(t *testing.T) {
	golden.Files(t, peerPlans, func(t *testing.T, f string, data []byte) {
		p, ds := Decode(data)
		if ds.HasErrors() {
			t.Fatalf("decode:\n%s", ds)
		}
		got := Validate(p).String()
		if want := fixtureWarnings[filepath.Base(f)]; got != want {
			t.Errorf("validate:\n%s\nwant:\n%s", got, want)
		}
	})
}
