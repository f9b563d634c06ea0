package dsl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

func TestParseLibraryAndFormatIdempotent(t *testing.T) {
	files, _ := filepath.Glob("../algorithms/*.msccl")
	if len(files) == 0 {
		t.Fatal("no algorithms")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, ds := Parse(f, src)
		if ds.HasErrors() {
			t.Fatalf("%s: %s", f, ds)
		}
		out := Format(file)
		// The library is kept in canonical form.
		if !bytes.Equal(out, src) {
			t.Errorf("%s is not canonically formatted:\n%s", f, out)
		}
	}
}

func TestSyntaxErrorPositions(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"collective allreduce\nfor r in 0..4 {\n", "x.msccl:3:1: error: syntax error: unexpected end of file"},
		{"collective allreduce\nparam ranks = 4 4\n", `x.msccl:2:17: error: syntax error: unexpected "4"`},
		{"collective allreduce\ncopy rank(0).input[0] => rank(1).output[0]\n", `did you mean "->"?`},
		{"collective allreduce # x\n", `x.msccl:1:22: error: invalid character '#'`},
		{"collective allreduce\nlet x = \"unterminated\n", `x.msccl:2:9: error: invalid character '"'`},
	} {
		_, ds := Parse("x.msccl", []byte(c.src))
		if !strings.Contains(ds.String(), c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.src, ds, c.want)
		}
	}
}

// FuzzParse: any input parses or fails with positioned diagnostics, never
// panics; what parses formats to a fixed point; the hand-written parser
// agrees with participle run on the grammar's tags (oracle_test.go).
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../algorithms/*.msccl")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	cases, _ := filepath.Glob("../testdata/dsl/*.txtar")
	for _, p := range cases {
		if ar, err := txtar.ParseFile(p); err == nil {
			for _, fl := range ar.Files {
				if fl.Name == "input.msccl" {
					f.Add(fl.Data)
				}
			}
		}
	}
	for _, s := range oracleSnippets {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if d := compareWithOracle(src); d != "" {
			t.Fatalf("the parser and its grammar's oracle (participle) disagree: %s", d)
		}
		file, ds := Parse("fuzz.msccl", src)
		if file == nil {
			if !ds.HasErrors() {
				t.Fatal("no tree and no error")
			}
			for _, d := range ds {
				if !d.Subject.Start.IsValid() {
					t.Fatalf("diagnostic without position: %s", d)
				}
			}
			return
		}
		out := Format(file)
		again, ds2 := Parse("fuzz.msccl", out)
		if again == nil {
			t.Fatalf("formatted output does not parse: %s\n%s", ds2, out)
		}
		if out2 := Format(again); !bytes.Equal(out, out2) {
			t.Fatalf("format not idempotent:\n%s\n---\n%s", out, out2)
		}
	})
}

// TestOperatorsAndRequire checks the lexing of the two-character
// operators (`**` is one token, not two `*`) and require's syntax.
func TestOperatorsAndRequire(t *testing.T) {
	src := "collective allreduce\nparam ranks = 2\nrequire ranks**2>>1<<3^1 == 17, \"m\"\nrequire ranks > 1\n"
	f, ds := Parse("x.msccl", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	r := f.Stmts[2].Require
	if r == nil || r.Msg == nil || *r.Msg != `"m"` {
		t.Fatalf("require not parsed: %+v", f.Stmts[2])
	}
	var ops []string
	for _, b := range r.Cond.Tail {
		ops = append(ops, b.Op)
	}
	if got := strings.Join(ops, " "); got != "** >> << ^ ==" {
		t.Errorf("operators %q", got)
	}
	if f.Stmts[3].Require == nil || f.Stmts[3].Require.Msg != nil {
		t.Errorf("require without a message not parsed")
	}
	for _, c := range []struct{ src, want string }{
		{"collective allreduce\nrequire , \"m\"\n", `x.msccl:2:9: error: syntax error: unexpected ","`},
		{"collective allreduce\nrequire 1, 2\n", `x.msccl:2:12: error: syntax error: unexpected "2"`},
		{"collective allreduce\ncopy rank(0).input[0] -> rank(1).output[0];via g\n", "x.msccl:2:44: error: via is a clause of an op, not an op: it goes on the op's own statement (e.g. `put ... via port`)"},
		{"collective allreduce chunks 1;chunks\n", "x.msccl:1:31: error: chunks is a keyword, not an op"},
		{"collective allreduce\nrequire;A\n", "x.msccl:2:1: error: require needs a condition; write e.g. `require ranks % 2 == 0, \"the ring pairs ranks\"`"},
		{"collective allreduce\nlet x = 2 * * 3\n", `x.msccl:2:13: error: syntax error: unexpected "*"`},
	} {
		_, ds := Parse("x.msccl", []byte(c.src))
		if !strings.Contains(ds.String(), c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.src, ds, c.want)
		}
	}
}

// TestDeepNesting: nesting past the parser's bound is a syntax error, not
// a stack overflow.
func TestDeepNesting(t *testing.T) {
	for _, c := range []struct{ open, close string }{{"(", ")"}, {"f(", ")"}, {"if 1 {", "}"}} {
		src := "let x = " + strings.Repeat(c.open, 20000) + "1" + strings.Repeat(c.close, 20000)
		if c.open == "if 1 {" {
			src = strings.Repeat(c.open, 20000) + strings.Repeat(c.close, 20000)
		}
		_, ds := Parse("x.msccl", []byte(src))
		if !strings.Contains(ds.String(), "levels of nesting") {
			t.Errorf("%s x 20000: %.200s", c.open, ds)
		}
	}
	// Within the bound, it parses.
	if _, ds := Parse("x.msccl", []byte("let x = "+strings.Repeat("(", 900)+"1"+strings.Repeat(")", 900))); ds.HasErrors() {
		t.Error(ds)
	}
}

// TestMisspelledKeywords: a statement whose name is a keyword misspelled
// is reported at the name, with the keyword, rather than as the syntax
// error (or the unknown ops) the misspelling makes of the line; a name
// that is only near a keyword is not.
func TestMisspelledKeywords(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"colective allreduce\nparam ranks = 2\n", `x.msccl:1:1: error: unknown statement "colective"; did you mean "collective"?`},
		{"collective allreduce\nparm ranks = 2\n", `x.msccl:2:1: error: unknown statement "parm"; did you mean "param"?`},
		{"collective allreduce\noptoin protocol = LL\n", `x.msccl:2:1: error: unknown statement "optoin"; did you mean "option"?`},
		{"collective allreduce\nfro r in 0..2 {\n  nop\n}\n", `x.msccl:2:1: error: unknown statement "fro"; did you mean "for"?`},
		{"collective allreduce\nfro r in 0..2 {\n  fro q in 0..2 { nop }\n}\n", "x.msccl:2:1: error: unknown statement \"fro\"; did you mean \"for\"?\n" +
			`x.msccl:3:3: error: unknown statement "fro"; did you mean "for"?`},
		{"collective allreduce\nrequre ranks > 1\n", `x.msccl:2:1: error: unknown statement "requre"; did you mean "require"?`},
		{"collective allreduce\nfnc f(x) = x\n", `x.msccl:2:1: error: unknown statement "fnc"; did you mean "fn"?`},
		{"collective allreduce\nif 1 { nop } esle { nop }\nparm x = 1\n", "x.msccl:2:14: error: unknown statement \"esle\"; did you mean \"else\"?\n" +
			`x.msccl:3:1: error: unknown statement "parm"; did you mean "param"?`},
		{"collective allreduce\nfro r in 0..2 {\n  if 1 { nop } ese if 0 { nop }\n}\n", "x.msccl:2:1: error: unknown statement \"fro\"; did you mean \"for\"?\n" +
			`x.msccl:3:16: error: unknown statement "ese"; did you mean "else"?`},
	} {
		_, ds := Parse("x.msccl", []byte(c.src))
		if ds.String() != c.want+"\n" {
			t.Errorf("%q:\n got %s\nwant %s", c.src, ds, c.want)
		}
	}
	// Ops near a keyword (get ~ let, nop ~ for/on, put ~ let) stay ops.
	src := "on rank(0) tb 0 {\n  nop\n  get rank(1).input[0] -> rank(0).output[0]\n  put rank(0).input[0] -> rank(1).output[0]\n  re rank(0).input[0] -> rank(0).output[0]\n}\n"
	if _, ds := Parse("x.msccl", []byte(src)); ds.HasErrors() {
		t.Errorf("ops near keywords: %s", ds)
	}
}
