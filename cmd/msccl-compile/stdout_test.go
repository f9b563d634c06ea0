package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileDashIsStdout: "-o -" writes the plan to standard output and
// leaves no file named "-" behind.
func TestCompileDashIsStdout(t *testing.T) {
	src, err := filepath.Abs("../../algorithms/scatter_direct.msccl")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := cmdCompile([]string{src, "-D", "ranks=2", "--no-verify", "-o", "-"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "{") {
		t.Errorf("stdout does not start with the plan: %.40q", stdout.String())
	}
	if _, err := os.Stat("-"); err == nil {
		t.Error(`a file named "-" was written`)
	}
}
