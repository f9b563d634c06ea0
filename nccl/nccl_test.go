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

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
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

func goEnv(t testing.TB, key string) string {
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
func buildC(t testing.TB, src string) (dir, bin string) {
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
	if spec := os.Getenv("MSCCL_HOSTBENCH_GO"); spec != "" {
		// This binary is a rank of BenchmarkHostTimeAllReduce's Go job.
		if err := goBenchRank(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	os.Exit(code)
}

// TestHandOverReason: which calls go to the real NCCL. The decision
// must depend only on what every rank passes alike, so it is checked
// here as a table over the call's fields and the communicator's size
// and device, on both ranks of a two-rank cpu job (and one rank alone).
func TestHandOverReason(t *testing.T) {
	t.Setenv("MSCCL_DEVICE", "cpu")
	id, err := msccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	pair := make([]*ncComm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range pair {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pair[r], errs[r] = initRank(id, 2, r, "")
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer pair[r].rc.Close()
	}
	soloID, err := msccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	solo, err := initRank(soloID, 1, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	defer solo.rc.Close()
	const f32, i32, i64, f16, f64 = 7, 2, 4, 6, 8
	const preMul = numOps // the first PreMulSum operator's id
	ar := func(dt, op int, n int64) call {
		b := n * dataTypes[dt].size
		return call{name: "ncclAllReduce", coll: ir.AllReduce, sendN: b, recvN: b, dtype: dt, op: op, reducing: true}
	}
	for _, tc := range []struct {
		what   string
		device string // "" the comm's own (cpu)
		ranks  int
		k      call
		want   string // a part of the reason; "" msccl-go runs it
	}{
		{"f32 sum", "", 2, ar(f32, opSum, 1001), ""},
		{"i32 prod", "", 2, ar(i32, opProd, 4), ""},
		{"f32 avg on cpu", "", 2, ar(f32, opAvg, 4), ""},
		{"f32 PreMulSum on cpu", "", 2, ar(f32, preMul, 4), ""},
		{"i64 sum", "", 2, ar(i64, opSum, 4), "ncclAllReduce of ncclInt64 (msccl-go has no such type"},
		{"f64 avg", "", 2, ar(f64, opAvg, 4), "ncclAllReduce of ncclFloat64"},
		{"f32 prod", "", 2, ar(f32, opProd, 4), "ncclProd on ncclFloat32"},
		{"f16 avg on cpu", "", 2, ar(f16, opAvg, 4), "ncclAvg on ncclFloat16 on the cpu device"},
		{"f32 avg on cuda", "cuda", 2, ar(f32, opAvg, 4), "ncclAvg on ncclFloat32 on the cuda device"},
		{"f32 PreMulSum on cuda", "cuda", 2, ar(f32, preMul, 4), "a PreMulSum operator on ncclFloat32 on the cuda device"},
		{"f32 sum on cuda", "cuda", 2, ar(f32, opSum, 4), ""},
		{"i64 sum of 0", "", 2, ar(i64, opSum, 0), ""},
		{"i64 allgather (bytes)", "", 2, call{name: "ncclAllGather", coll: ir.AllGather, sendN: 32, recvN: 64, dtype: i64}, ""},
		{"i64 send", "", 2, call{name: "ncclSend", sendN: 32, dtype: i64, p2p: 1}, ""},
		{"i64 reduce", "", 2, call{name: "ncclReduce", coll: ir.Reduce, sendN: 32, recvN: 32, dtype: i64, reducing: true}, "ncclReduce of ncclInt64"},
		{"one rank: i64 sum is a copy", "", 1, ar(i64, opSum, 4), ""},
		{"one rank: f16 avg is a copy", "cuda", 1, ar(f16, opAvg, 4), ""},
		{"one rank: f64 PreMulSum", "cuda", 1, ar(f64, preMul, 4), "ncclAllReduce of ncclFloat64"},
	} {
		comms := pair
		if tc.ranks == 1 {
			comms = []*ncComm{solo}
		}
		for _, c := range comms {
			if tc.device != "" {
				c = &ncComm{rc: c.rc, device: tc.device, plans: map[planKey]string{}}
			}
			k := tc.k
			k.c = c
			got := k.handOverReason()
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("%s, rank %d of %d: reason %q, want one naming %q", tc.what, c.rc.Rank(), tc.ranks, got, tc.want)
			}
		}
	}
}
