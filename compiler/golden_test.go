package compiler

import (
	"bytes"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/golden"
	"github.com/msccl-go/msccl-go/ir"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// TestAlgorithmGoldens keeps one archive per library algorithm at 4 ranks
// (hierarchical: 2 nodes x 2 GPUs): its source, the IR dump after the last
// pass, the plan JSON and the CPU executor's verdict. The diff of an
// archive is the review of a compiler change.
func TestAlgorithmGoldens(t *testing.T) {
	for _, f := range libraryFiles(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".msccl")
		t.Run(name, func(t *testing.T) {
			defs := libraryDefs(name, 4, 2)
			src := readFile(t, f)
			var lastDump string
			last := PassNames()[len(PassNames())-1]
			p, sm, ds := CompileSource(filepath.Base(f), src, defs, Options{Check: true, DumpAfter: last, Dump: func(_, s string) { lastDump = s }})
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			js, err := ir.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			var verdict strings.Builder
			for _, size := range librarySizes(p) {
				rep, err := cpu.Run(p, cpu.Options{Size: size, DType: cpu.F32})
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&verdict, "%d bytes f32: %s\n", size, rep.Verdict)
				for _, d := range reportDiags(rep, sm, "") {
					verdict.WriteString(d.String() + "\n")
				}
			}
			ar := &txtar.Archive{
				Comment: []byte(fmt.Sprintf("%s compiled with %s\n", filepath.Base(f), formatDefines(defs))),
				Files: []txtar.File{
					{Name: "source.msccl", Data: src},
					{Name: "dump", Data: []byte(lastDump)},
					{Name: "plan.json", Data: js},
					{Name: "verdict", Data: []byte(verdict.String())},
				},
			}
			golden.Check(t, filepath.Join("..", "testdata", "algorithms", name+".txtar"), txtar.Format(ar), *update)
		})
	}
}

func formatDefines(d map[string]int64) string {
	var ks []string
	for k := range d {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("-D %s=%d", k, d[k]))
	}
	return strings.Join(parts, " ")
}

// TestDiagnosticGoldens runs the conformance cases of testdata/dsl: each
// archive holds input.msccl, optional defines (NAME=VALUE lines) and the
// expected diagnostics. The archive comment picks the mode: "compile"
// (default; a clean compile is then verified on the CPU executor and its
// findings reported), "dump PASS" (the same, plus the state after one pass:
// pass-level goldens), or "fmt" (expected canonical formatting in
// "formatted").
func TestDiagnosticGoldens(t *testing.T) {
	files := corpus(t, "../testdata/dsl/*.txtar", 20)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src, defs := corpusProgram(t, ar)
			mode := strings.TrimSpace(string(ar.Comment))
			var out []txtar.File
			if strings.HasPrefix(mode, "fmt") {
				fl, ds := dsl.Parse("input.msccl", src)
				formatted := []byte(ds.String())
				if fl != nil {
					formatted = dsl.Format(fl)
					again, _ := dsl.Parse("input.msccl", formatted)
					if again == nil || !bytes.Equal(dsl.Format(again), formatted) {
						t.Errorf("formatting is not idempotent")
					}
				}
				out = append(out, txtar.File{Name: "formatted", Data: formatted})
			} else {
				var dump string
				opts := Options{Check: true}
				if pass, ok := strings.CutPrefix(mode, "dump "); ok {
					opts.DumpAfter = strings.TrimSpace(pass)
					opts.Dump = func(_, s string) { dump = s }
				}
				p, sm, ds := CompileSource("input.msccl", src, defs, opts)
				if opts.DumpAfter != "" {
					out = append(out, txtar.File{Name: "dump " + opts.DumpAfter, Data: []byte(dump)})
				}
				if p != nil && !ds.HasErrors() {
					n := int64(len(p.GPUs))
					ds = append(ds, Verify(p, sm, []int64{n * n * 64}, []cpu.DType{cpu.I32})...)
				}
				for _, d := range ds {
					if d.Code == "" {
						t.Errorf("diagnostic without a code (callers branch on codes): %s", d)
					}
				}
				text := ds.String()
				if text == "" {
					text = "ok\n"
				}
				out = append(out, txtar.File{Name: "diagnostics", Data: []byte(text)})
			}
			var keep []txtar.File
			for _, fl := range ar.Files {
				if fl.Name == "input.msccl" || fl.Name == "defines" {
					keep = append(keep, fl)
				}
			}
			ar.Files = append(keep, out...)
			golden.Check(t, f, txtar.Format(ar), *update)
		})
	}
}
