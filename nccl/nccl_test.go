package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	dir := t.TempDir()
	lib := filepath.Join(dir, "libmsccl_nccl.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared: %v\n%s", err, out)
	}
	cc := strings.Fields(goEnv(t, "CC")) // cgo's C compiler, maybe with flags
	bin := filepath.Join(dir, "allcalls")
	args := append(cc[1:], "-Wall", "-Werror", "-I.", "-o", bin, "testdata/allcalls.c", "-L"+dir, "-lmsccl_nccl", "-Wl,-rpath,"+dir)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	const world = 4
	idFile := filepath.Join(dir, "id")
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
