package compiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"golang.org/x/tools/txtar"
)

// FuzzCompile parses, compiles (with the IR checker after every pass) and,
// when that succeeds, verifies on the CPU executor. Nothing may panic, and
// the compiler may reject a program but never emit an invalid plan
// ("internal compiler error").
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("../algorithms/*.msccl")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, uint8(2))
		}
	}
	cases, _ := filepath.Glob("../testdata/dsl/*.txtar")
	for _, p := range cases {
		if ar, err := txtar.ParseFile(p); err == nil {
			for _, fl := range ar.Files {
				if fl.Name == "input.msccl" {
					f.Add(fl.Data, uint8(1))
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte, r uint8) {
		file, ds := dsl.Parse("fuzz.msccl", src)
		if ds.HasErrors() {
			return
		}
		defs := map[string]int64{}
		if declaredParams(file)["ranks"] {
			defs["ranks"] = 2 + int64(r%4)
		}
		p, sm, ds := Compile(file, defs, Options{Check: true, MaxOps: 5000})
		for _, d := range ds {
			if strings.Contains(d.Summary, "internal compiler error") {
				t.Fatalf("%s\nsource:\n%s", d, src)
			}
		}
		if p == nil {
			return
		}
		n := int64(len(p.GPUs))
		c := int64(max(p.GPUs[0].InputChunks, p.GPUs[0].OutputChunks))
		if n*c > 1024 {
			return // keep each input fast; large plans are the library tests' job
		}
		Verify(p, sm, []int64{n * c * 64}, []cpu.DType{cpu.I32})
	})
}
