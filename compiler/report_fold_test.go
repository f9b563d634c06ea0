package compiler

import (
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/diag"
)

// TestVerifyFoldsFindings: one mistake in a schedule shows on every rank,
// in every launch and at every proof size, with byte ranges that grow with
// the size. Verify reports it once, at its statement, counting the other
// ranks or blocks and naming the other runs; before folding these
// programs gave one diagnostic per rank and size (24 for the race).
func TestVerifyFoldsFindings(t *testing.T) {
	for _, c := range []struct {
		name, src string
		code      string
		at        string // line:col of the one diagnostic
		want      []string
	}{
		{
			name: "deadlock ring",
			src: `collective allgather chunks 1
param ranks = 8
for r in 0..ranks {
  on rank(r) tb 0 {
    wait to (r - 1) % ranks
    copy rank(r).input[0] -> rank(r).output[r]
    signal to (r + 1) % ranks
  }
}
`,
			code: diag.CodeDeadlock, at: "5:5",
			want: []string{"(and 7 more blocks stuck here)", "also stuck here: rank 1 block 0, rank 2 block 0, rank 3 block 0, rank 4 block 0 and 3 more", "the same at"},
		},
		{
			// Each rank reads the slot its left neighbour puts into before
			// it waits for the signal: the same race on all eight ranks,
			// seen from the put on some and from the copy on others.
			name: "race on every rank",
			src: `collective allgather chunks 1
param ranks = 8
for r in 0..ranks {
  on rank(r) tb 0 {
    rlxsignal to (r + 1) % ranks
    rlxwait to (r - 1) % ranks
    nop
    copy rank(r).input[0] -> rank(r).output[r]
    put rank(r).input[0] -> rank((r + 1) % ranks).scratch[0]
    nop
    signal to (r + 1) % ranks
    copy rank(r).scratch[0] -> rank(r).output[(r - 1) % ranks]
    wait to (r - 1) % ranks
  }
}
`,
			code: diag.CodeRace, at: "9:5",
			want: []string{"(and on 7 more ranks)", "the same at"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, sm, ds := CompileSource("fold.msccl", []byte(c.src), nil, Options{})
			if ds.HasErrors() {
				t.Fatalf("does not compile:\n%s", ds)
			}
			got := Verify(p, sm, nil, []cpu.DType{cpu.F32, cpu.BF16})
			var of []diag.Diagnostic
			for _, d := range got {
				if d.Code == c.code {
					of = append(of, d)
				}
			}
			if len(of) != 1 {
				t.Fatalf("%d %s diagnostics, want one folded:\n%s", len(of), c.code, got)
			}
			s := of[0].String()
			if !strings.HasPrefix(s, "fold.msccl:"+c.at+": ") {
				t.Errorf("reported at %s, want %s", of[0].Subject.Start, c.at)
			}
			for _, w := range c.want {
				if !strings.Contains(s, w) {
					t.Errorf("missing %q in\n%s", w, s)
				}
			}
		})
	}
}
