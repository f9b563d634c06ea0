package compiler

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

func compileVerify(t *testing.T, src string, defs map[string]int64, size int64) *ir.Plan {
	t.Helper()
	p, sm, ds := CompileSource("t.msccl", []byte(src), defs, Options{Check: true})
	if ds.HasErrors() {
		t.Fatalf("compile: %s", ds)
	}
	if vs := Verify(p, sm, []int64{size}, []cpu.DType{cpu.F32, cpu.I32}); len(vs) > 0 {
		t.Fatalf("verify: %s\n%s", vs, ir.Dump(p))
	}
	return p
}

func countOps(p *ir.Plan, code ir.OpCode) int {
	n := 0
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			for _, op := range tb.Ops {
				if op.Code == code {
					n++
				}
				for _, in := range op.Ops() {
					if in.Code == code {
						n++
					}
				}
			}
		}
	}
	return n
}

// Instances split every chunk and block; the result must stay correct.
func TestInstances(t *testing.T) {
	src := `collective allreduce chunks ranks inplace
param ranks = 4
param inst = 3
option instances = inst
for r in 0..ranks {
  for p in 0..ranks {
    if p != r {
      copy rank(r).input[p] -> rank(p).scratch[r] tb p
    }
  }
}
for r in 0..ranks {
  for p in 0..ranks {
    if p != r {
      reduce rank(r).input[r], rank(r).scratch[p] -> rank(r).input[r] tb r
    }
  }
  for p in 0..ranks {
    if p != r {
      copy rank(r).input[r] -> rank(p).input[r] tb r
    }
  }
}
`
	p := compileVerify(t, src, nil, 4*3*4*64)
	if got := len(p.GPUs[0].ThreadBlocks); got != 12 || p.GPUs[0].InputChunks != 12 {
		t.Errorf("want 12 blocks and 12 chunks, got %d blocks, %d chunks", got, p.GPUs[0].InputChunks)
	}
	if countOps(p, ir.OpRes) == 0 {
		t.Error("reduce then put was not fused into res")
	}
}

// Port channels everywhere (option intra = port): puts become pws/pwsf
// and flushes guard sources.
func TestPortChannels(t *testing.T) {
	src := `collective allgather chunks 1
param ranks = 4
option intra = port
for r in 0..ranks {
  copy rank(r).input[0] -> rank(r).output[r]
  for p in 0..ranks {
    if p != r {
      copy rank(r).input[0] -> rank(p).output[r]
    }
  }
}
`
	p := compileVerify(t, src, nil, 4*1024)
	if countOps(p, ir.OpPws)+countOps(p, ir.OpPwsf) == 0 {
		t.Errorf("no put-with-signal in a port plan:\n%s", ir.Dump(p))
	}
	if len(p.GPUs[0].Channels) != 1 || p.GPUs[0].Channels[0].Type != ir.ChanPort {
		t.Errorf("want port channels only: %+v", p.GPUs[0].Channels)
	}
}

// A channel-level program with a pipeline and a thread-block group goes
// through unchanged and runs correctly.
func TestChannelLevelPipeline(t *testing.T) {
	src := `collective allgather chunks 2
param ranks = 2
for r in 0..ranks {
  on rank(r) tb 0 {
    rlxsignal to 1 - r
    rlxwait to 1 - r
    nop
    copy rank(r).input[0:2] -> rank(r).output[2 * r:2 * r + 2]
    pipeline unit 256 chunks 2 {
      put rank(r).input[0:2] -> rank(1 - r).output[2 * r:2 * r + 2] tbg 0, 1
    }
    nop
    signal to 1 - r
    wait to 1 - r
  }
}
`
	p := compileVerify(t, src, nil, 2*2*1024)
	if countOps(p, ir.OpPipeline) != 2 {
		t.Errorf("pipelines lost:\n%s", ir.Dump(p))
	}
}

// Channel-level diagnostics found by the static balance check come with
// the source line, also for waits without signals.
func TestChannelLevelBalance(t *testing.T) {
	src := `collective allgather chunks 1
param ranks = 2
on rank(0) tb 0 {
  copy rank(0).input[0] -> rank(0).output[0]
  wait to 1
}
on rank(1) tb 0 {
  copy rank(1).input[0] -> rank(1).output[1]
}
`
	_, _, ds := CompileSource("t.msccl", []byte(src), nil, Options{})
	if !strings.Contains(ds.String(), "t.msccl:5:3: error: wait with no matching signal") {
		t.Errorf("got %s", ds)
	}
}
