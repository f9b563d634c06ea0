// Package golden compares test output with a file kept in testdata, and
// rewrites the file when the test binary was asked to (-update): the diff
// of the file is then the review. It also walks the input files of such
// tests (Files) and of fuzz corpora (Seed). It owns no flag (packages that use it
// define -update themselves, so two users never register one twice) and
// touches no file but the one it is given.
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		t.Errorf("%s differs (go test -update rewrites it after review):\n%s", path, diff(string(want), string(got)))
	}
}

// diff shows short files whole and long ones (a compiled plan's archive)
// by their first differing line.
func diff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	if len(wl) <= 40 && len(gl) <= 40 {
		return fmt.Sprintf("--- got\n%s--- want\n%s", got, want)
	}
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, w, g)
		}
	}
	return ""
}

// Files runs body as a subtest for every file that matches pattern,
// named after the file without its extension, with the file's bytes. It
// fails when nothing matches: a glob that finds nothing tests nothing.
func Files(t *testing.T, pattern string, body func(t *testing.T, path string, data []byte)) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", pattern, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			body(t, f, data)
		})
	}
}

// Seed adds the bytes of every file that matches the patterns to f's
// corpus; it fails when none matches.
func Seed(f *testing.F, patterns ...string) {
	f.Helper()
	n := 0
	for _, pat := range patterns {
		files, err := filepath.Glob(pat)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no seed files match %v", patterns)
	}
}
