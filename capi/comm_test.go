package main

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// A job of one process (no launcher variables): the checks commCall
// makes before anything runs, and every collective of a world of one
// rank (a copy, as with NCCL). The multi-process runs are python/tests'
// test_comm (four processes through the real ABI) and the root package's
// TestCollectivesCPU (the communicator itself).
func TestCommArguments(t *testing.T) {
	for _, k := range []string{"MSCCL_RANK", "MSCCL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "MSCCL_UNIQUE_ID"} {
		t.Setenv(k, "")
	}
	ch, err := openComm("cpu", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := table.release(ch); err != nil {
			t.Error(err)
		}
	}()
	info, err := commInfo(ch)
	if err != nil || string(info) != `{"device":"cpu","rank":0,"size":1}` {
		t.Errorf("info %s, %v", info, err)
	}
	h := compileRing(t, `{"ranks": 2}`)
	defer table.release(h)
	buf := make([]byte, 1024)
	p := unsafe.Pointer(&buf[0])
	for _, tc := range []struct {
		a    callArgs
		st   int
		want string
	}{
		{callArgs{comm: ch, plan: h, in: p, inBytes: 1024, out: p, outBytes: 1024, dtype: "f32"}, statusInvalid, "is for 2 ranks; this communicator has 1"},
		{callArgs{comm: ch + 1000, plan: h, dtype: "f32"}, statusInvalid, "no communicator with handle"},
		{callArgs{comm: h, plan: h, dtype: "f32"}, statusInvalid, "no communicator with handle"},
		{callArgs{comm: ch, plan: ch, dtype: "f32"}, statusInvalid, "no plan with handle"},
		{callArgs{comm: ch, collective: "allreduce", in: p, inBytes: 1024, out: p, outBytes: 1024, dtype: "f32", stream: 7}, statusInvalid, "pass 0"},
		{callArgs{comm: ch, collective: "allreduce", inBytes: 1024, out: p, outBytes: 1024, dtype: "f32"}, statusInvalid, "is NULL"},
		{callArgs{comm: ch, collective: "allreduce", in: p, inBytes: 1024, out: p, outBytes: 1024, dtype: "f64"}, statusInvalid, "dtype"},
		{callArgs{comm: ch, collective: "allreduce", in: p, inBytes: 1024, out: p, outBytes: 1024, dtype: "f32", op: "avg"}, statusInvalid, `reduction "avg"`},
		{callArgs{comm: ch, collective: "allreduce", in: p, inBytes: 1024, out: p, outBytes: 1000, dtype: "f32"}, statusInput, "one length"},
	} {
		st, msg := guard(func() error { return commCall(tc.a) })
		if st != tc.st || !strings.Contains(msg, tc.want) {
			t.Errorf("%+v: %s %q, want %s %q", tc.a, statusName[st], msg, statusName[tc.st], tc.want)
		}
	}
	// One rank: every collective copies its input to its output.
	in := make([]byte, 1024)
	for i := 0; i < len(in); i += 4 {
		binary.LittleEndian.PutUint32(in[i:], math.Float32bits(float32(i)))
	}
	for _, c := range []string{"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "gather", "scatter"} {
		out := make([]byte, 1024)
		a := callArgs{comm: ch, collective: c, in: unsafe.Pointer(&in[0]), inBytes: 1024, out: unsafe.Pointer(&out[0]), outBytes: 1024, dtype: "f32"}
		if err := commCall(a); err != nil {
			t.Errorf("%s on one rank: %v", c, err)
		} else if string(out) != string(in) {
			t.Errorf("%s on one rank: the output is not the input", c)
		}
	}
	if _, err := openComm("gpu", "", 0, 0); err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Errorf("device gpu: %v", err)
	}
	if _, err := openComm("cpu", "garbage", 0, 2); err == nil {
		t.Error("a malformed unique id was accepted")
	}
}

func compileFile(t *testing.T, name string) int64 {
	t.Helper()
	path := "../algorithms/" + name + ".msccl"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, ds, err := compileSource(path, src, `{"ranks": 4}`)
	if err != nil {
		t.Fatalf("compile %s: %v (%v)", name, err, ds)
	}
	t.Cleanup(func() { table.release(h) })
	return h
}

// Device names reach msccl.OpenComm as the cuda device with its ordinal;
// without a driver the refusal names the device.
func TestOpenCUDAWithoutDriver(t *testing.T) {
	if _, _, err := parseDevice("cuda:x"); err == nil {
		t.Error("cuda:x accepted")
	}
	if n, o, err := parseDevice("cuda:3"); n != "cuda" || o != "3" || err != nil {
		t.Errorf("cuda:3: %q %q %v", n, o, err)
	}
	if n, _, _ := parseDevice("gpu:0"); n != "gpu:0" {
		t.Errorf("gpu:0 became %q; msccl should judge it whole", n)
	}
	if cuda.Init() == nil {
		t.Skip("a CUDA driver loads here: the refusal is for machines without one")
	}
	t.Setenv("MSCCL_RANK", "")
	t.Setenv("RANK", "")
	if _, err := openComm("cuda:0", "", 0, 0); err == nil || !strings.Contains(err.Error(), `device "cuda"`) {
		t.Errorf("cuda without a driver: %v", err)
	}
}
