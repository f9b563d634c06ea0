package cpu

import (
	"fmt"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// knownRacy lists upstream fixtures with a real race: the verdict must be
// race with every output right, so a fix upstream (or a regression here)
// shows up.
var knownRacy = map[string]string{
	// Rank 1 copies input chunks 0-1 into scratch with tbg_info over the
	// two-chunk range (block 0 writes chunk 0, block 1 chunk 1), but rank 0
	// reads them with tbg_info per chunk (block 0 reads the first half of
	// each chunk) and each of rank 0's blocks waits only for the signal of
	// the rank-1 block with the same channel. So rank 0's block 0 reads
	// bytes 128-192 of rank 1's scratch, written by rank 1's block 1, with
	// no signal from that block: it works on hardware only because both
	// blocks of rank 1 run their copy at about the same time.
	"reduce_tbg.json": "copy",
	// Each rank's glres multicast-stores the reduced half into every
	// member's buffer, then the ranks hand over with nop; rlxsignal and
	// rlxwait and end their kernels. A relaxed pair publishes no data
	// (docs/model.md), so a rank's host may read its output before the
	// peer's multicast store has landed there.
	"reduce_nvls.json":          "glres",
	"reduce_nvls_pipeline.json": "glres",
}

func TestFixturesCorrect(t *testing.T) {
	plans := fixtures(t)
	for _, name := range sortedNames(plans) {
		p := plans[name]
		ops := []ir.ReduceOp{ir.ReduceSum}
		if reduces(p) {
			ops = []ir.ReduceOp{ir.ReduceSum, ir.ReduceMin, ir.ReduceMax}
		}
		sz := sizes(p)
		if needsEvenChunks[name] == "" {
			sz = append(sz, unevenChunks(p))
		}
		for _, size := range sz {
			for _, dt := range []DType{F32, F16, BF16, I32} {
				for _, op := range ops {
					t.Run(fmt.Sprintf("%s/%d/%s/%s", name, size, dt, op), func(t *testing.T) {
						rep, err := Run(p, Options{Size: size, DType: dt, Reduce: op, Seed: 7})
						if err != nil {
							t.Fatal(err)
						}
						if op, ok := knownRacy[name]; ok {
							if rep.Verdict != Race || rep.WrongTotal > 0 {
								t.Fatalf("want a race with right results:\n%s", rep)
							}
							for _, r := range rep.Races {
								if r.A.OpName != op && r.B.OpName != op {
									t.Errorf("unexpected race %v / %v", r.A, r.B)
								}
							}
							return
						}
						if !rep.OK() {
							t.Fatalf("not correct:\n%s", rep)
						}
					})
				}
			}
		}
	}
}
