package compiler

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
)

// TestAutoBlocksFitLimits compiles every library algorithm with its `tb`
// clauses removed, at 16 ranks where one block per peer overflows the
// executor's 64 ops for the rings, and requires a plan within the limits
// that the CPU executor proves correct.
func TestAutoBlocksFitLimits(t *testing.T) {
	for _, f := range libraryFiles(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".msccl")
		t.Run(name, func(t *testing.T) {
			src := readFile(t, f)
			file, ds := dsl.Parse(name+".msccl", src)
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			dropTB(file.Stmts)
			defs := libraryDefs(name, 16, 8)
			p, sm, ds := Compile(file, defs, Options{Check: true})
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			n := int64(len(p.GPUs))
			if v := Verify(p, sm, []int64{n * n * 64}, []cpu.DType{cpu.I32}); v.HasErrors() {
				t.Fatal(v)
			}
		})
	}
}

// dropTB removes the `tb` clauses of chunk-level ops.
func dropTB(ss []*dsl.Stmt) {
	for _, s := range ss {
		switch {
		case s.Op != nil:
			kept := s.Op.Clauses[:0]
			for _, c := range s.Op.Clauses {
				if c.Key != "tb" {
					kept = append(kept, c)
				}
			}
			s.Op.Clauses = kept
		case s.For != nil:
			dropTB(s.For.Body)
		case s.If != nil:
			for i := s.If; i != nil; i = i.ElseIf {
				dropTB(i.Then)
				dropTB(i.Else)
			}
		}
	}
}
