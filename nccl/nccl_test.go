package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAllCallsCPU builds libmsccl_nccl.so, compiles testdata/allcalls.c
// against nccl.h with cgo's C compiler, and runs it as 4 processes on the
// cpu device: every exported call, every collective checked element by
// element, group aggregation, send/recv rings, split communicators,
// error codes of bad arguments, and an abort while the peers are blocked
// in an allreduce.
func TestAllCallsCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the shared library takes half a minute")
	}
	_, bin := buildC(t, "testdata/allcalls.c")
	const world = 4
	idFile := filepath.Join(t.TempDir(), "id")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		out, errs bytes.Buffer
		err       error
	}
	res := make([]*result, world)
	cmds := make([]*exec.Cmd, world)
	for r := range world {
		res[r] = &result{}
		cmd := exec.CommandContext(ctx, bin, fmt.Sprint(r), fmt.Sprint(world), idFile)
		cmd.Env = append(os.Environ(), "MSCCL_DEVICE=cpu", "MSCCL_NCCL_FALLBACK=0", "MSCCL_DEBUG=INFO")
		cmd.Stdout, cmd.Stderr = &res[r].out, &res[r].errs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		res[r].err = cmd.Wait()
	}
	for r, x := range res {
		if x.err != nil || !strings.Contains(x.out.String(), fmt.Sprintf("rank %d: all calls checked", r)) {
			t.Errorf("rank %d: %v\nstdout:\n%s\nstderr:\n%s", r, x.err, x.out.String(), x.errs.String())
			continue
		}
		// One INFO line per distinct reason, however often it comes.
		if n := strings.Count(x.errs.String(), "NCCL INFO libmsccl_nccl: not run by msccl-go: ncclAllReduce of ncclInt64"); n != 1 {
			t.Errorf("rank %d: %d INFO lines for the int64 allreduce, want 1:\n%s", r, n, x.errs.String())
		}
	}
}

func goEnv(t *testing.T, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestHandOverRefusedCPU runs testdata/handover.c's refusals: a call
// msccl-go does not run (a PreMulSum over f64) with MSCCL_NCCL_LIB unset,
// naming a missing file, a library that is no NCCL, and libmsccl_nccl
// itself, each ncclInvalidUsage naming the reason and the cause, alone
// and at the end of a group. (The hand-over itself needs a GPU and the
// real NCCL: scripts/gpu/nccl-handover.sh.)
func TestHandOverRefusedCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the shared library takes half a minute")
	}
	dir, bin := buildC(t, "testdata/handover.c")
	cmd := exec.Command(bin, "errors", filepath.Join(dir, "libmsccl_nccl.so"))
	cmd.Env = append(os.Environ(), "MSCCL_DEVICE=cpu", "MSCCL_DEBUG=INFO")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hand-over refusals checked") {
		t.Fatalf("%v\n%s", err, out)
	}
	// One INFO line for the reason, however often the call is refused.
	if n := strings.Count(string(out), "NCCL INFO libmsccl_nccl: not run by msccl-go: ncclAllReduce of ncclFloat64"); n != 1 {
		t.Errorf("%d INFO lines for the f64 PreMulSum, want 1:\n%s", n, out)
	}
}

// lib is libmsccl_nccl.so, built once for the tests of this run.
var lib struct {
	once sync.Once
	dir  string
	err  error
}

// buildC builds the library (once) and compiles src against nccl.h with
// cgo's C compiler; it returns the library's folder and the program.
func buildC(t *testing.T, src string) (dir, bin string) {
	lib.once.Do(func() {
		lib.dir, lib.err = os.MkdirTemp("", "msccl-nccl-test")
		if lib.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(lib.dir, "libmsccl_nccl.so"), ".").CombinedOutput()
		if err != nil {
			lib.err = fmt.Errorf("go build -buildmode=c-shared: %v\n%s", err, out)
		}
	})
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	cc := strings.Fields(goEnv(t, "CC")) // cgo's C compiler, maybe with flags
	bin = filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append(cc[1:], "-Wall", "-Werror", "-I.", "-o", bin, src, "-L"+lib.dir, "-lmsccl_nccl", "-Wl,-rpath,"+lib.dir, "-lm")
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	return lib.dir, bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	os.Exit(code)
}
