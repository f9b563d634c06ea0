package cpu

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/ir"
)

// mutateBytes applies the small mutations that data encodes (5 bytes
// each: what, rank, block, op, value) to a copy of p.
func mutateBytes(p *ir.Plan, data []byte) *ir.Plan {
	q := clonePlan(p)
	for len(data) >= 5 {
		what, rb, bb, ob, v := data[0], int(data[1]), int(data[2]), int(data[3]), data[4]
		data = data[5:]
		g := &q.GPUs[rb%len(q.GPUs)]
		if len(g.ThreadBlocks) == 0 {
			continue
		}
		tb := &g.ThreadBlocks[bb%len(g.ThreadBlocks)]
		if len(tb.Ops) == 0 {
			continue
		}
		i := ob % len(tb.Ops)
		op := &tb.Ops[i]
		if body := op.Ops(); len(body) > 0 && v&0x80 != 0 {
			op = &body[int(v)%len(body)]
		}
		delta := int(int8(v)) % 3
		switch what % 9 {
		case 0:
			if len(op.Src) > 0 {
				op.Src[int(v)%len(op.Src)].Index += delta
			}
		case 1:
			if len(op.Dst) > 0 {
				op.Dst[int(v)%len(op.Dst)].Index += delta
			}
		case 2:
			if len(op.Src) > 0 {
				op.Src[int(v)%len(op.Src)].Size += delta
			}
		case 3:
			tb.Ops = append(tb.Ops[:i], tb.Ops[i+1:]...)
		case 4:
			tb.Ops = append(tb.Ops[:i+1], tb.Ops[i:]...)
			tb.Ops[i+1] = cloneOps(tb.Ops[i : i+1])[0]
		case 5:
			if i+1 < len(tb.Ops) {
				tb.Ops[i], tb.Ops[i+1] = tb.Ops[i+1], tb.Ops[i]
			}
		case 6:
			if len(op.ChannelIDs) > 0 {
				op.ChannelIDs = append([]int(nil), op.ChannelIDs...)
				op.ChannelIDs[0] += delta
			}
		case 7:
			op.Code = ir.OpCode(int(v) % int(ir.NumOps))
		case 8:
			op.SetTBG(&ir.TBGInfo{TBID: int(v) % 4, TBGSize: int(v)%3 + 1})
		}
	}
	return q
}

// FuzzRun feeds randomly mutated fixtures to the simulator: it must never
// panic and never run long (MaxSteps bounds every run).
func FuzzRun(f *testing.F) {
	plans := fixtures(f)
	names := sortedNames(plans)
	for i := range names {
		f.Add(uint8(i), uint8(1), []byte{})
		f.Add(uint8(i), uint8(2), []byte{1, 0, 0, 3, 1})
		f.Add(uint8(i), uint8(3), []byte{3, 1, 0, 2, 0, 7, 0, 1, 1, 12})
		f.Add(uint8(i), uint8(0), []byte{8, 0, 0, 0, 5, 5, 1, 1, 1, 0})
		f.Add(uint8(i), uint8(130), []byte{1, 0, 0, 3, 1}) // symbolic, on ranges
	}
	f.Fuzz(func(t *testing.T, which, sizeSel uint8, data []byte) {
		p := plans[names[int(which)%len(names)]]
		q := mutateBytes(p, data)
		size := sizes(p)[0] * int64(sizeSel%8+1)
		start := time.Now()
		rep, err := Run(q, Options{Size: size, DType: DTypes[int(sizeSel)%len(DTypes)], MaxSteps: 200_000, Trace: sizeSel&1 == 1, Symbolic: sizeSel >= 128})
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("run took %v", d)
		}
		if err == nil {
			_ = rep.String()
		}
	})
}

// FuzzRunJSON feeds arbitrary plan files (seeded with the fixtures and
// the broken plans) through the decoder into the simulator.
func FuzzRunJSON(f *testing.F) {
	for _, dir := range []string{fixtureDir, brokenDir} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, uint8(1))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mult uint8) {
		p, ds := ir.Decode(data)
		if p == nil || ds.HasErrors() || len(p.GPUs) == 0 || len(p.GPUs) > 64 || p.BufferAlignment <= 0 {
			return
		}
		ref := max(p.GPUs[0].InputChunks, p.GPUs[0].OutputChunks, 1)
		size := int64(p.BufferAlignment) * int64(ref) * int64(len(p.GPUs)) * int64(mult%4+1)
		if size <= 0 || size > 1<<22 {
			return
		}
		rep, err := Run(p, Options{Size: size, DType: F16, MaxSteps: 100_000, MaxMemory: 256 << 20})
		if err == nil {
			_ = rep.String()
		}
	})
}
