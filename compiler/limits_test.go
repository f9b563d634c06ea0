package compiler

import (
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

func TestParsePlanPath(t *testing.T) {
	tests := []struct {
		path string
		want planPath
	}{
		{"gpus[3].threadblocks[1].ops", planPath{3, 1, -1, -1, ".ops"}},
		{"gpus[0].threadblocks[30].ops[7].semaphore_ids", planPath{0, 30, 7, -1, ".semaphore_ids"}},
		{"gpus[2].threadblocks[0].ops[4].ops[11].channel_ids", planPath{2, 0, 4, 11, ".channel_ids"}},
		{"gpus[0].threadblocks[0].channels[1].channel_ids[16]", planPath{0, 0, -1, -1, ".channels[1].channel_ids[16]"}},
		{"gpus[1].channels[0]", planPath{1, -1, -1, -1, ".channels[0]"}},
		{"collective", planPath{-1, -1, -1, -1, "collective"}},
		{"gpus[x].threadblocks[0]", planPath{-1, -1, -1, -1, "gpus[x].threadblocks[0]"}},
		{"gpus[-1]", planPath{-1, -1, -1, -1, "gpus[-1]"}},
	}
	for _, tc := range tests {
		if got := parsePlanPath(tc.path); got != tc.want {
			t.Errorf("parsePlanPath(%q) = %+v, want %+v", tc.path, got, tc.want)
		}
	}
}

// TestNthOp: the op a block's 65th slot holds, counting pipeline bodies
// as upstream flattens them, is where an ops-per-block error is placed.
func TestNthOp(t *testing.T) {
	pipe := ir.Op{Code: ir.OpPipeline}
	pipe.SetOps(make([]ir.Op, 3))
	tb := &ir.ThreadBlock{Ops: []ir.Op{{Code: ir.OpNop}, pipe, {Code: ir.OpNop}}}
	// Flattened: nop, pipeline, body 0, body 1, body 2, nop.
	want := [][2]int{{0, -1}, {1, -1}, {1, 0}, {1, 1}, {1, 2}, {2, -1}, {-1, -1}}
	for n, w := range want {
		if op, inner := nthOp(tb, n); op != w[0] || inner != w[1] {
			t.Errorf("nthOp(%d) = %d, %d, want %d, %d", n, op, inner, w[0], w[1])
		}
	}
	if op, inner := nthOp(nil, 0); op != -1 || inner != -1 {
		t.Errorf("nthOp(nil) = %d, %d", op, inner)
	}
}
