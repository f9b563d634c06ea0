package ir

import (
	"os"
	"path/filepath"
	"testing"
)

// fixtureWarnings lists the warnings that fixtures legitimately draw, by
// fixture; anything else is a validator bug.
var fixtureWarnings = map[string]string{}

func TestFixturesValidate(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
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
}
