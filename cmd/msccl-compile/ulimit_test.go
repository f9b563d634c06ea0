package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
)

// helperEnv, when set, makes TestHelperMain run the command line it holds
// as msccl-compile's main would, so that a test can run the command in a
// process of its own (here: under an address-space limit).
const helperEnv = "MSCCL_COMPILE_HELPER"

func TestHelperMain(t *testing.T) {
	args := os.Getenv(helperEnv)
	if args == "" {
		t.Skip("runs only as a child of TestProofUnderAddressLimit")
	}
	tuneGC()
	os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
}

// TestProofUnderAddressLimit compiles the 512-rank ring allreduce under
// `ulimit -v` 3 GB, where its proof (about 4 GB a run) cannot fit:
// the command must refuse the proof and exit 1, not die with "fatal
// error: out of memory" (exit 2), which it did while its memory budget
// looked only at the host's available memory.
func TestProofUnderAddressLimit(t *testing.T) {
	fulltest.Skip(t, "compiles a 512-rank plan")
	if runtime.GOOS != "linux" {
		t.Skip("ulimit -v in sh")
	}
	src, _ := filepath.Abs("../../algorithms/allreduce_ring.msccl")
	cmd := exec.Command("sh", "-c", `ulimit -v 3000000 && exec "$0" -test.run='^TestHelperMain$'`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=compile "+src+" -D ranks=512 -o "+filepath.Join(t.TempDir(), "p.json"), "MSCCL_HOST_MEMORY=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBad || !strings.Contains(string(out), "the proof could not run") || !strings.Contains(string(out), "happens-before clocks") {
		t.Fatalf("want exit %d and the proof refused for memory; got %v:\n%s", exitBad, err, out)
	}
}
