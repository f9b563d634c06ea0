package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the expected output of the script tests")

// TestScripts runs each testdata/script/*.txtar: the archive comment is one
// command line (words split on spaces; $ROOT is the repository root and
// $WORK a fresh directory holding the archive's other files); the files
// "stdout", "stderr" and "exit" are the expected results. Words of the
// form NAME=VALUE before msccl-compile set environment variables, and
// the Go version in the output reads $GOVERSION.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/script/*.txtar")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	root, _ := filepath.Abs("../..")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			want := map[string]string{}
			for _, f := range ar.Files {
				switch f.Name {
				case "stdout", "stderr", "exit":
					want[f.Name] = string(f.Data)
				default:
					p := filepath.Join(work, f.Name)
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.WriteFile(p, f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			line := strings.TrimSpace(string(ar.Comment))
			line = strings.ReplaceAll(line, "$ROOT", root)
			line = strings.ReplaceAll(line, "$WORK", work)
			args := strings.Fields(line)
			// Leading NAME=VALUE words set the environment, as in a shell.
			for len(args) > 0 && strings.Contains(args[0], "=") {
				k, v, _ := strings.Cut(args[0], "=")
				t.Setenv(k, v)
				args = args[1:]
			}
			if len(args) == 0 || args[0] != "msccl-compile" {
				t.Fatalf("comment must be a msccl-compile command line, got %q", line)
			}
			var stdout, stderr bytes.Buffer
			code := run(args[1:], &stdout, &stderr)
			clean := func(s string) string {
				s = strings.ReplaceAll(s, work, "$WORK")
				s = strings.ReplaceAll(s, runtime.Version(), "$GOVERSION")
				return strings.ReplaceAll(s, root, "$ROOT")
			}
			got := map[string]string{
				"stdout": clean(stdout.String()),
				"stderr": clean(stderr.String()),
				"exit":   strconv.Itoa(code) + "\n",
			}
			if *update {
				var files []txtar.File
				for _, f := range ar.Files {
					if _, ok := got[f.Name]; !ok {
						files = append(files, f)
					}
				}
				for _, n := range []string{"stdout", "stderr", "exit"} {
					files = append(files, txtar.File{Name: n, Data: []byte(got[n])})
				}
				ar.Files = files
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, n := range []string{"exit", "stdout", "stderr"} {
				if got[n] != want[n] {
					t.Errorf("%s differs (run with -update to accept)\n--- got\n%s--- want\n%s", n, got[n], want[n])
				}
			}
		})
	}
}
