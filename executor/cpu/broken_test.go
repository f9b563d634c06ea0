package cpu

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
)

const brokenDir = "../../testdata/broken/sim"

// brokenCases are plans derived from the upstream fixtures, each with one
// defect, and the verdict the simulator must reach. The full report is the
// golden file next to the plan (go test -run TestBroken -update rewrites it).
var brokenCases = []brokenCase{
	{"dropped_wait.json", Race, "reduce.json without rank 1's first wait: it reads rank 0's input before rank 0 said it is ready", 0},
	{"dropped_signal.json", Deadlock, "reduce.json without rank 0's first signal: rank 1's second wait never gets a token", 0},
	{"circular_waits.json", Deadlock, "allreduce.json with block 0 of both ranks waiting before it signals", 0},
	{"missing_nop.json", Race, "reduce.json without the nop between rank 0's get into scratch and the res that reads it", 0},
	{"put_conflict.json", Race, "reduce.json with rank 1's put aimed at input chunks 0-1 of rank 0, which rank 0 writes itself", 0},
	{"wrong_chunk.json", WrongResult, "reduce.json with rank 1 putting scratch chunks 0-1 (its own input) instead of 2-3 (the sums)", 0},
	{"packet_unwritten.json", Deadlock, "reduce_pack.json with rank 0 unpacking scratch chunk 2, where no packets are ever written", 0},
	{"broadcast_ll_three_launches.json", Race, "a one-way LL broadcast with double scratch and no handshake (compiled before the sync pass ordered launch k against k+2): correct over two launches, but the root can run two launches ahead and overwrite the scratch half a peer is still reading", 3},
}

type brokenCase struct {
	file     string
	want     Verdict
	why      string
	launches int // 0: the default
}

// run simulates the case's plan at its first proof size, seed 1 and its
// launch count, with opt's mode (data type or symbolic), and fails unless
// the verdict is the one the case names; TestBroken and
// TestBrokenSymbolic differ only in the mode and the golden they keep.
func (c brokenCase) run(t *testing.T, opt Options) *Report {
	t.Helper()
	p := loadPlan(t, filepath.Join(brokenDir, c.file))
	opt.Size, opt.Seed, opt.Launches = sizes(p)[0]*4, 1, c.launches
	rep, err := Run(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != c.want {
		t.Fatalf("verdict %s, want %s (%s)\n%s", rep.Verdict, c.want, c.why, rep)
	}
	return rep
}

func TestBroken(t *testing.T) {
	for _, c := range brokenCases {
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			rep := c.run(t, Options{DType: I32})
			got := "# " + c.why + "\n" + rep.String()
			golden.Check(t, filepath.Join(brokenDir, strings.TrimSuffix(c.file, ".json")+".want"), []byte(got), *update)
		})
	}
}
