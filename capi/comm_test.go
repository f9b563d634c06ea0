package main

import (
	"strings"
	"testing"
	"unsafe"
)

// A job of one process (no launcher variables) and the checks commRun
// makes before anything runs; the multi-process runs are python/tests'
// test_comm (four processes through the real ABI).
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
		comm, plan int64
		in, out    int64
		dtype, op  string
		stream     uint64
		want       string
	}{
		{ch, h, 1024, 1024, "f32", "sum", 0, "is for 2 ranks; this communicator has 1"},
		{ch + 1000, h, 1024, 1024, "f32", "sum", 0, "no communicator with handle"},
		{h, h, 1024, 1024, "f32", "sum", 0, "no communicator with handle"},
		{ch, ch, 1024, 1024, "f32", "sum", 0, "no plan with handle"},
		{ch, h, 1024, 1024, "f32", "sum", 7, "pass 0"},
	} {
		st, msg := guard(func() error {
			return commRun(tc.comm, tc.plan, p, tc.in, p, tc.out, tc.dtype, tc.op, tc.stream)
		})
		if st != statusInvalid || !strings.Contains(msg, tc.want) {
			t.Errorf("%+v: %s %q", tc, statusName[st], msg)
		}
	}
	if _, err := openComm("gpu", "", 0, 0); err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Errorf("device gpu: %v", err)
	}
	if _, err := openComm("cpu", "garbage", 0, 2); err == nil {
		t.Error("a malformed unique id was accepted")
	}
}
