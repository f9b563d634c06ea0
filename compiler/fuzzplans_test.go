package compiler

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// fuzzPlansDir holds FuzzProof's corpus as plan files for the GPU oracle
// (executor/cuda's TestGPUFuzzPlans), which cannot run the fuzzer's
// mutations itself.
const fuzzPlansDir = "../testdata/fuzzplans"

// fuzzManifest is fuzzPlansDir/manifest.json: one case per FuzzProof
// seed and corpus entry whose plan the symbolic proof accepts at its size
// and launch count. Plans are deduplicated by content: a plan file may
// serve several cases.
type fuzzManifest struct {
	Comment string     `json:"comment"`
	Cases   []fuzzCase `json:"cases"`
}

type fuzzCase struct {
	Plan       string   `json:"plan"`     // file in the directory: the first 16 hex digits of the plan's SHA-256
	Input      string   `json:"input"`    // "seed N" or "corpus NAME" (testdata/fuzz/FuzzProof/NAME)
	Source     string   `json:"source"`   // the plan the input starts from
	Mutation   string   `json:"mutation"` // what proofMutate did
	Size       int64    `json:"size"`     // message size, bytes
	Launches   int      `json:"launches"` // back-to-back launches
	DTypes     []string `json:"dtypes"`   // the types FuzzProof's byte-level runs use
	Reductions []string `json:"reductions"`
}

const fuzzManifestComment = "FuzzProof's seeds and corpus entries whose plan the symbolic proof accepts, as plans at their size and launch count; " +
	"each case runs in every dtype and reduction listed (prod in i32 only, as FuzzProof runs it). " +
	"Inputs: FuzzProof's seeds, compiler/testdata/fuzz/FuzzProof, and corpus/ here (a sample of the fuzzer's cache corpus). " +
	"Regenerate: go test ./compiler -run TestFuzzProofDump -update (MSCCL_FUZZ_IMPORT=$(go env GOCACHE)/fuzz/github.com/msccl-go/msccl-go/compiler/FuzzProof adds inputs; MSCCL_FUZZ_DUMP=DIR writes elsewhere). " +
	"Replayed on a GPU by executor/cuda's TestGPUFuzzPlans."

// TestFuzzProofDump checks that testdata/fuzzplans is FuzzProof's corpus
// as it compiles today: it turns every seed, every corpus entry and every
// input kept in testdata/fuzzplans/corpus into its case
// (proofInput.prepare), keeps those the symbolic proof accepts, and
// compares the plan files and the manifest byte for byte with the
// directory. -update rewrites the directory, and with
// MSCCL_FUZZ_IMPORT=DIR (the fuzzer's cache corpus) first adds a sample
// of DIR's inputs to the kept ones (importCorpus); MSCCL_FUZZ_DUMP=DIR
// writes the dump to DIR instead of comparing.
func TestFuzzProofDump(t *testing.T) {
	srcs := proofSources(t)
	var inputs []proofInput
	var names []string
	for i, in := range proofSeeds(srcs) {
		inputs, names = append(inputs, in), append(names, fmt.Sprintf("seed %d", i))
	}
	dir := os.Getenv("MSCCL_FUZZ_DUMP")
	if *update && dir == "" {
		dir = fuzzPlansDir
	}
	keptDir := filepath.Join(fuzzPlansDir, "corpus")
	if imp := os.Getenv("MSCCL_FUZZ_IMPORT"); imp != "" {
		if !*update {
			t.Fatalf("MSCCL_FUZZ_IMPORT adds inputs to %s: run with -update", keptDir)
		}
		importCorpus(t, srcs, imp, keptDir)
	}
	for _, d := range []struct{ dir, prefix string }{{"testdata/fuzz/FuzzProof", "corpus "}, {keptDir, "kept "}} {
		corpus, err := readProofCorpus(d.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range corpus {
			inputs, names = append(inputs, e.in), append(names, d.prefix+e.name)
		}
	}
	files, m := fuzzDump(t, srcs, inputs, names)
	if len(m.Cases) < len(inputs)/2 {
		t.Errorf("only %d of %d inputs make a proven case: the dump would miss most of the corpus", len(m.Cases), len(inputs))
	}
	if dir != "" {
		writeDump(t, dir, files)
		t.Logf("wrote %d cases, %d plan files to %s", len(m.Cases), len(files)-1, dir)
		return
	}
	have, err := filepath.Glob(filepath.Join(fuzzPlansDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	stale := func(format string, args ...any) {
		t.Errorf("%s is stale: %s; regenerate it: go test ./compiler -run TestFuzzProofDump -update", fuzzPlansDir, fmt.Sprintf(format, args...))
	}
	for _, path := range have {
		if _, ok := files[filepath.Base(path)]; !ok {
			stale("%s is no case's plan", filepath.Base(path))
		}
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(fuzzPlansDir, name))
		switch {
		case err != nil:
			stale("%v", err)
		case !bytes.Equal(got, want):
			stale("%s differs from what the corpus compiles to", name)
		}
	}
}

// fuzzDump builds the dump: file name -> contents, manifest.json
// included.
func fuzzDump(t *testing.T, srcs []*proofSource, inputs []proofInput, names []string) (map[string][]byte, fuzzManifest) {
	t.Helper()
	var dts []string
	for _, dt := range diffDTypes {
		dts = append(dts, dt.String())
	}
	files := map[string][]byte{}
	m := fuzzManifest{Comment: fuzzManifestComment, Cases: []fuzzCase{}}
	seen := map[string]bool{}
	for i, in := range inputs {
		c, ok := in.prepare(srcs)
		if !ok || !c.sym.OK() {
			continue // not proven here: no right answer to compare
		}
		reds := proofReductions(c.p)
		if len(reds) == 0 {
			continue // serves no reduction: every run refuses it
		}
		js, err := ir.Encode(c.p)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, js); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		buf.WriteByte('\n')
		sum := sha256.Sum256(buf.Bytes())
		file := hex.EncodeToString(sum[:8]) + ".json"
		files[file] = buf.Bytes()
		key := fmt.Sprintf("%s %d %d", file, c.size, c.launches)
		if seen[key] {
			continue
		}
		seen[key] = true
		source := c.source
		if strings.HasPrefix(source, "generated program") {
			source = fmt.Sprintf("generated program (genProgram seed %d)", in.which)
		}
		fc := fuzzCase{Plan: file, Input: names[i], Source: source, Mutation: c.mutation, Size: c.size, Launches: c.launches, DTypes: dts}
		for _, r := range reds {
			fc.Reductions = append(fc.Reductions, string(r))
		}
		m.Cases = append(m.Cases, fc)
	}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["manifest.json"] = append(js, '\n')
	return files, m
}

// writeDump replaces dir's JSON files with files.
func writeDump(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, path := range old {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A corpusEntry is one file of the fuzzer's corpus directory.
type corpusEntry struct {
	name string
	in   proofInput
}

// readProofCorpus reads FuzzProof's corpus files (the "go test fuzz v1"
// encoding: one Go literal per argument) in name order.
func readProofCorpus(dir string) ([]corpusEntry, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []corpusEntry
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		vals, err := parseCorpusFile(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(vals) != 4 {
			return nil, fmt.Errorf("%s: %d values, FuzzProof takes 4 (which, sizeSel, launches, data)", path, len(vals))
		}
		var in proofInput
		var ok [4]bool
		var n uint64
		n, ok[0] = vals[0].(uint64)
		in.which = uint16(n)
		n, ok[1] = vals[1].(uint64)
		in.sizeSel = uint8(n)
		n, ok[2] = vals[2].(uint64)
		in.launches = uint8(n)
		in.data, ok[3] = vals[3].([]byte)
		if ok != [4]bool{true, true, true, true} {
			return nil, fmt.Errorf("%s: want three integers and a []byte, got %v", path, vals)
		}
		out = append(out, corpusEntry{filepath.Base(path), in})
	}
	return out, nil
}

// parseCorpusFile decodes a "go test fuzz v1" file whose values are
// unsigned integers (uint8(…), uint16(…), byte('…')) and []byte("…"):
// integers come back as uint64, byte slices as []byte.
func parseCorpusFile(s string) ([]any, error) {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) == 0 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a fuzz corpus file (want the header %q)", "go test fuzz v1")
	}
	var vals []any
	for i, line := range lines[1:] {
		e, err := parser.ParseExpr(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+2, err)
		}
		call, ok := e.(*ast.CallExpr)
		var lit *ast.BasicLit
		if ok && len(call.Args) == 1 {
			lit, _ = call.Args[0].(*ast.BasicLit)
		}
		if lit == nil {
			return nil, fmt.Errorf("line %d: want TYPE(literal), got %q", i+2, line)
		}
		if _, isSlice := call.Fun.(*ast.ArrayType); isSlice && lit.Kind == token.STRING {
			str, err := strconv.Unquote(lit.Value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+2, err)
			}
			vals = append(vals, []byte(str))
			continue
		}
		switch lit.Kind {
		case token.INT:
			n, err := strconv.ParseUint(lit.Value, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+2, err)
			}
			vals = append(vals, n)
		case token.CHAR:
			r, _, _, err := strconv.UnquoteChar(lit.Value[1:len(lit.Value)-1], '\'')
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+2, err)
			}
			vals = append(vals, uint64(r))
		default:
			return nil, fmt.Errorf("line %d: unsupported literal %s", i+2, lit.Value)
		}
	}
	return vals, nil
}

// importCorpus copies into kept a diverse sample of the fuzzer's own
// corpus in dir (the inputs `go test -fuzz FuzzProof` found to widen
// coverage, under $(go env GOCACHE)/fuzz/.../FuzzProof): inputs whose
// mutated plan the proof accepts, one per source plan and shape of
// mutation, within a budget of cases and plan bytes that keeps the dump
// at a few MB. The seeds are mostly unmutated plans, which
// executor/cuda's other tests run already; these are what the fuzzer
// made of them.
func importCorpus(t *testing.T, srcs []*proofSource, dir, kept string) {
	t.Helper()
	const maxCases, maxBytes = 120, 3 << 20
	corpus, err := readProofCorpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	digits := regexp.MustCompile(`[0-9]+`)
	seen := map[string]bool{}
	var keep []corpusEntry
	var bytes int
	proven := 0
	for _, e := range corpus {
		c, ok := e.in.prepare(srcs)
		if !ok || !c.sym.OK() || c.mutation == "none" || len(proofReductions(c.p)) == 0 {
			continue
		}
		proven++
		src := c.source
		if strings.HasPrefix(src, "generated program") {
			src = "generated"
		}
		shape := src + " " + digits.ReplaceAllString(c.mutation, "N")
		if seen[shape] || len(keep) >= maxCases {
			continue
		}
		js, err := ir.Encode(c.p)
		if err != nil || bytes+len(js)/2 > maxBytes {
			continue
		}
		seen[shape] = true
		bytes += len(js) / 2 // compacted, roughly
		keep = append(keep, e)
	}
	if err := os.MkdirAll(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range keep {
		b, err := os.ReadFile(filepath.Join(dir, e.name))
		if err == nil {
			err = os.WriteFile(filepath.Join(kept, e.name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("imported %d of %d inputs of %s (%d proven and mutated)", len(keep), len(corpus), dir, proven)
}
