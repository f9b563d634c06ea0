package compiler

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/internal/golden"
	"github.com/msccl-go/msccl-go/ir"
	"golang.org/x/tools/txtar"
)

// corpusDTypes are the byte-level oracles of the corpus proofs.
var corpusDTypes = []cpu.DType{cpu.F32, cpu.BF16, cpu.I32}

// positioned matches a diagnostic placed at a source line of the program.
var positioned = regexp.MustCompile(`(?m)^input\.msccl:[0-9]+:[0-9]+: error: `)

// TestWrongCorpus runs testdata/wrong: deliberately wrong schedules
// (wrong_<class>_<n>.txtar), each of which must be rejected with an error
// at a position in its source, and correct ones (ok_<what>.txtar) that
// must stay accepted. Unlike testdata/dsl, a program that compiles is
// proven as msccl-compile does: at ProofSizes (every size its rule
// admits), symbolically over ProofLaunches launches, with byte-level runs
// in f32, bf16 and i32 beside it. The archive gets the plan's size rule
// ("rule") and the verdict ("diagnostics"). An optional "sizes" file lists
// message sizes to try one by one ("sizes" in the output): a size outside
// the rule is refused, the refusal placed at the op that constrains the
// rule (how size-fragile chunk geometry is rejected: the compiler accepts
// the program only for the sizes where it is correct); a size inside is
// run symbolically.
//
// Every input must start with a comment saying what is wrong (or right)
// and why.
func TestWrongCorpus(t *testing.T) {
	files, _ := filepath.Glob("../testdata/wrong/*.txtar")
	nWrong := 0
	classes := map[string]int{}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".txtar")
		if strings.HasPrefix(base, "wrong_") {
			nWrong++
			cls := strings.TrimPrefix(base, "wrong_")
			if i := strings.LastIndex(cls, "_"); i >= 0 {
				cls = cls[:i]
			}
			classes[cls]++
		}
	}
	if nWrong < 30 {
		t.Errorf("want at least 30 wrong schedules in testdata/wrong, have %d", nWrong)
	}
	t.Logf("%d wrong schedules in %d classes: %v", nWrong, len(classes), classes)
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".txtar")
		// The default run checks the first schedule of every class
		// (wrong_peer_1, ...) and every fixture that is not numbered.
		if fulltest.Sample() && strings.HasPrefix(base, "wrong_") && !strings.HasSuffix(base, "_1") {
			continue
		}
		t.Run(base, func(t *testing.T) {
			ar, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src, defs := corpusProgram(t, ar)
			var sizes []int64
			for _, fl := range ar.Files {
				switch fl.Name {
				case "sizes":
					for _, s := range strings.Fields(string(fl.Data)) {
						n, err := strconv.ParseInt(s, 10, 64)
						if err != nil {
							t.Fatalf("bad size %q", s)
						}
						sizes = append(sizes, n)
					}
				}
			}
			if !strings.HasPrefix(string(src), "//") {
				t.Errorf("input.msccl must start with a comment saying what is wrong and why")
			}
			text, rule, tried := corpusVerdict(t, src, defs, sizes)
			out := []txtar.File{}
			for _, fl := range ar.Files {
				if fl.Name == "input.msccl" || fl.Name == "defines" || fl.Name == "sizes" {
					out = append(out, fl)
				}
			}
			if rule != "" {
				out = append(out, txtar.File{Name: "rule", Data: []byte(rule)})
			}
			if tried != "" {
				out = append(out, txtar.File{Name: "tried", Data: []byte(tried)})
			}
			out = append(out, txtar.File{Name: "diagnostics", Data: []byte(text)})
			switch {
			case strings.HasPrefix(base, "wrong_"):
				if !positioned.MatchString(text + tried) {
					t.Errorf("a wrong schedule must be rejected with an error at a source position, got:\n%s%s", text, tried)
				}
			case strings.HasPrefix(base, "ok_"):
				if text != "ok\n" {
					t.Errorf("a correct schedule must be accepted, got:\n%s", text)
				}
			default:
				t.Errorf("name the case wrong_<class>_<n> or ok_<what>")
			}
			ar.Files = out
			golden.Check(t, f, txtar.Format(ar), *update)
		})
	}
}

// corpusVerdict compiles src and proves it as msccl-compile does; rule is
// the plan's size rule in words, tried the outcome at each of sizes.
func corpusVerdict(t *testing.T, src []byte, defs map[string]int64, sizes []int64) (text, rule, tried string) {
	t.Helper()
	p, sm, ds := CompileSource("input.msccl", src, defs, Options{Check: true})
	text = ds.String()
	if p != nil && !ds.HasErrors() {
		r, err := p.SizeRule()
		if err != nil {
			rule = "error: " + err.Error() + "\n"
		} else {
			ps, _ := ProofSizes(p)
			rule = fmt.Sprintf("%s; %s\nproof sizes %v\n", r, r.Why(), ps)
		}
		text += Verify(p, sm, nil, corpusDTypes).String()
		var b strings.Builder
		for _, size := range sizes {
			b.WriteString(triedAt(p, sm, r, size))
		}
		tried = b.String()
	}
	if text == "" {
		text = "ok\n"
	}
	return text, rule, tried
}

// triedAt runs p at one message size: refused outside its rule (placed at
// the op the rule names), else proven symbolically at that size alone.
func triedAt(p *ir.Plan, sm *SourceMap, r ir.SizeRule, size int64) string {
	if err := r.Check(size); err != nil {
		at := sm.rangeOfPath(r.Fragile, "input.msccl")
		if at.Start.Line == 0 {
			at = sm.header() // the collective's definition forces the split
		}
		if _, err := cpu.Run(p, cpu.Options{Size: size, Symbolic: true, Launches: ProofLaunches}); err == nil {
			return fmt.Sprintf("%d bytes: outside the rule, but cpu.Run did not refuse it\n", size)
		}
		return fmt.Sprintf("%s: error: %v\n", at.Start, err)
	}
	ds := Verify(p, sm, []int64{size}, nil)
	if len(ds) == 0 {
		return fmt.Sprintf("%d bytes: proven\n", size)
	}
	return ds.String()
}
