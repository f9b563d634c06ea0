package ir

import (
	"os"
	"testing"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// TestLimitCodes checks that every limit the broken fixtures exceed comes
// with its code, the count the plan uses and the maximum: the compiler
// places and words these from the fields, never from the summary.
func TestLimitCodes(t *testing.T) {
	tests := []struct {
		file       string
		code       string
		count, max int
	}{
		{"limit_65_ops", diag.CodeOpsPerBlock, 65, MaxOpsPerBlock},
		{"limit_17_channels_block", diag.CodeChannelsPerBlock, 17, MaxChannelsPerBlock},
		{"limit_9_channels_op", diag.CodeChannelsPerOp, 9, MaxChannelsPerOp},
		{"limit_11_refs", diag.CodeRefsPerOp, 11, MaxRefsPerOp},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("../testdata/broken/ir/" + tc.file + ".json")
			if err != nil {
				t.Fatal(err)
			}
			_, ds, _ := Load(data)
			found := false
			for _, d := range ds {
				if d.Code == "" || d.IsLimit() && (d.Count <= d.Max || d.Max == 0) {
					t.Errorf("%s: code %q, count %d, max %d: every diagnostic has a code, a limit its count past its max", d, d.Code, d.Count, d.Max)
				}
				if d.Code == tc.code {
					found = true
					if d.Count != tc.count || d.Max != tc.max {
						t.Errorf("%s: count %d max %d, want %d and %d", d, d.Count, d.Max, tc.count, tc.max)
					}
				}
			}
			if !found {
				t.Errorf("no %s diagnostic in\n%s", tc.code, ds)
			}
		})
	}
	p := loadFixture(t, "../testdata/peer-plans/allreduce_pipeline.json")
	p.GPUs[0].ThreadBlocks[0].Ops[0].Ops()[0].SetSemaphoreIDs(make([]int, 17))
	for _, d := range Validate(p) {
		if d.Code == diag.CodeSemaphoresPerOp && d.Count == 17 && d.Max == MaxSemaphoresPerOp {
			return
		}
	}
	t.Errorf("17 semaphores on an op: no %s diagnostic", diag.CodeSemaphoresPerOp)
}
