// Package golden compares test output with a file kept in testdata, and
// rewrites the file when the test binary was asked to (-update): the diff
// of the file is then the review. It owns no flag (packages that use it
// define -update themselves, so two users never register one twice) and
// touches no file but the one it is given.
package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the file at path; with update it writes got
// there instead (creating the folder).
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update creates it)", err, t.Name())
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -update rewrites it after review):\n--- got\n%s--- want\n%s", path, got, want)
	}
}
