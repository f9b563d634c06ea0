package dsl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
	"golang.org/x/tools/txtar"
)

// The grammar is defined by ast.go's struct tags; the parser that runs is
// written by hand (descent.go, lex.go). These tests run participle on the
// tags beside it, as an oracle: both must accept the same programs with
// the same trees and positions.

// oracleRules are lex.go's rules as participle's regexp lexer.
var oracleRules = []lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*`},
	{Name: "String", Pattern: `"(\\.|[^"\\\n])*"`},
	{Name: "Int", Pattern: `0[xX][0-9a-fA-F]+|[0-9]+(KiB|MiB|GiB|K|M|G)?`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Op", Pattern: `\.\.|->|==|!=|<=|>=|<<|>>|\*\*|&&|\|\||[-+*/%<>!=^&|~(){}\[\],.:;@]`},
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
}

var oracleLexer = sync.OnceValue(func() *lexer.StatefulDefinition {
	return lexer.MustSimple(oracleRules)
})

var oracleParser = sync.OnceValue(func() *participle.Parser[File] {
	return participle.MustBuild[File](
		participle.Lexer(oracleLexer()),
		participle.Elide("Whitespace", "Comment"),
		participle.UseLookahead(lookahead),
	)
})

// oracleToken is one token of participle's lexer.
type oracleToken struct {
	kind tokKind
	val  string
	pos  lexer.Position
}

// oracleTokens lexes src with the regexp lexer: the parser's tokens (no
// whitespace, no comments), or the position of the first invalid text.
func oracleTokens(filename string, src []byte) ([]oracleToken, *lexer.Position) {
	l, err := oracleLexer().LexString(filename, string(src))
	if err != nil {
		panic(err)
	}
	syms := oracleLexer().Symbols()
	kinds := map[lexer.TokenType]tokKind{syms["Int"]: tInt, syms["String"]: tString, syms["Ident"]: tIdent, syms["Op"]: tOp}
	var out []oracleToken
	for {
		t, err := l.Next()
		if err != nil {
			var pe participle.Error
			if errors.As(err, &pe) {
				p := pe.Position()
				return nil, &p
			}
			panic(err)
		}
		if t.EOF() {
			out = append(out, oracleToken{kind: tEOF, pos: t.Pos})
			return out, nil
		}
		if k, ok := kinds[t.Type]; ok {
			out = append(out, oracleToken{kind: k, val: t.Value, pos: t.Pos})
		}
	}
}

// compareWithOracle checks the hand-written lexer and parser against
// participle on one input; it returns what differs, "" when nothing does.
// Error positions may differ (participle's choice among errors of equal
// depth is its own); acceptance, trees and positions may not.
func compareWithOracle(src []byte) string {
	const name = "o.msccl"
	if len(src) > maxSource {
		return ""
	}
	want, bad := oracleTokens(name, src)
	d, _, ds := lex(name, src)
	if bad != nil {
		if len(ds) == 0 || ds[0].Subject.Start != posOf(*bad) {
			return fmt.Sprintf("regexp lexer stops at %v; hand-written: %v", *bad, ds)
		}
		return ""
	}
	if len(ds) > 0 {
		return fmt.Sprintf("regexp lexer accepts; hand-written: %v", ds)
	}
	if len(want) != len(d.toks) {
		return fmt.Sprintf("%d tokens, want %d", len(d.toks), len(want))
	}
	for i := range want {
		t := &d.toks[i]
		if t.kind != want[i].kind || d.val(t) != want[i].val || d.pos(t) != want[i].pos {
			return fmt.Sprintf("token %d: %d %q at %v, want %+v", i, t.kind, d.val(t), d.pos(t), want[i])
		}
	}
	of, oerr := oracleParser().ParseBytes(name, src)
	f, err := d.parseFile()
	if len(d.misspelled) > 0 {
		return "" // an error whatever the grammar makes of it (misspelled.go)
	}
	switch {
	case oerr != nil && err != nil:
		return ""
	case oerr != nil:
		return fmt.Sprintf("participle rejects (%v); hand-written accepts", oerr)
	case err != nil:
		return fmt.Sprintf("participle accepts; hand-written rejects at %v: %v (expected %s)", err.pos, err, err.expect)
	}
	normalize(reflect.ValueOf(of))
	normalize(reflect.ValueOf(f))
	if !reflect.DeepEqual(of, f) {
		return "trees differ:\n" + dumpTree(of) + "\n---- hand-written:\n" + dumpTree(f)
	}
	return ""
}

// normalize makes empty slices nil, so that "no statements" compares
// equal however each parser spells it.
func normalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			normalize(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			normalize(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 && !v.IsNil() && v.CanSet() {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		for i := 0; i < v.Len(); i++ {
			normalize(v.Index(i))
		}
	}
}

func dumpTree(f *File) string {
	var b strings.Builder
	var walk func(v reflect.Value, indent string)
	walk = func(v reflect.Value, indent string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				b.WriteString("nil\n")
				return
			}
			walk(v.Elem(), indent)
		case reflect.Struct:
			if p, ok := v.Interface().(lexer.Position); ok {
				fmt.Fprintf(&b, "%d:%d@%d\n", p.Line, p.Column, p.Offset)
				return
			}
			b.WriteString(v.Type().Name() + "\n")
			for i := 0; i < v.NumField(); i++ {
				fmt.Fprintf(&b, "%s  %s: ", indent, v.Type().Field(i).Name)
				walk(v.Field(i), indent+"  ")
			}
		case reflect.Slice:
			fmt.Fprintf(&b, "[%d]\n", v.Len())
			for i := 0; i < v.Len(); i++ {
				fmt.Fprintf(&b, "%s  - ", indent)
				walk(v.Index(i), indent+"  ")
			}
		default:
			fmt.Fprintf(&b, "%v\n", v.Interface())
		}
	}
	walk(reflect.ValueOf(f), "")
	return b.String()
}

// oracleInputs are the library, the golden cases and small programs that
// reach every backed-out part of the grammar.
func oracleInputs(t testing.TB) [][]byte {
	var out [][]byte
	files, _ := filepath.Glob("../algorithms/*.msccl")
	more, _ := filepath.Glob("../testdata/perf/*.msccl")
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	cases, _ := filepath.Glob("../testdata/dsl/*.txtar")
	for _, p := range cases {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range ar.Files {
			if fl.Name == "input.msccl" {
				out = append(out, fl.Data)
			}
		}
	}
	for _, s := range oracleSnippets {
		out = append(out, []byte(s))
	}
	return out
}

var oracleSnippets = []string{
	"", "// only a comment\n", "collective allreduce chunks 1;chunks\n", "require;A\n", "require , \"m\"\n", "require 1, 2\n",
	"collective allreduce chunks\ncopy rank(0).input[0] -> rank(1).output[0]\n",
	"collective sendrecv peers r -> (r + 1) % ranks\n", "collective sendrecv peers [1, 0]\n", "collective sendrecv peers r -> \n",
	"collective sendrecv peers [1, \n", "collective sendrecv peers x y\n",
	"for i in 0..4 step 2 { nop }\n", "for i in 0..4 step { nop }\n", "for i in 0..4 { }\n", "for i in 0..\n",
	"if a { } else if b { } else { nop }\n", "if a { } else x\n", "if a { } else\n",
	"on rank(0) tb 1 { put rank(0).input[0:2] -> rank(1).scratch[0] via port; signal to 1@2, 3 }\n",
	"on rank(0) tb 1 x\n", "pipeline unit 1K chunks 4 { copy rank(0).input[0] -> rank(1).output[0] }\n",
	"copy rank(0).input[0], rank(1).input[0] -> rank(1).output[0], rank(0).output[0] tb 1\n",
	"copy rank(0).input[0], x\n", "copy -> x\n", "copy rank(0)x\n", "copy rank(0).input[0:]\n",
	"let x = min(1, 2) + max(3) - abs(-4) * log2(!5) ** 2 % 3 << 1 >> 1 ^ 1 || 0 && 1 == 1 != 2 <= 3 >= 4 < 5 > 6\n",
	"let x = f()\n", "let x = f(,)\n", "let x = f(1,)\n", "let x = f(1\n", "let x = (1\n", "let x = 1 +\n", "let x = - -1\n",
	"let x = 0x1G 64KiB 1Gx 0xg \"s\\\"q\" 0\n", "let = 1\n", "param ranks = 4 4\n", "option protocol = LL;\n",
	"tb 1\n", "x tb\n",
	"let x = a & b | ~c &^ d\n", "let x = if a then b else c + 1\n", "let x = if a\ncopy rank(0).input[0] -> rank(1).output[0]\n", "let x = if + 1\n",
	"let if = 2\nlet y = if\n", "let x = if a then if b then 1 else 2 else 3\n", "let x = if a then 1\n", "if if a then 1 else 0 { nop }\n",
	"let r = [0, 2, 4]\nlet y = r[1] + [1][0] + (r)[0] + f(1)[2]\n", "let r = []\n", "let r = [1,\n", "let r = [1,]\n", "let y = r[\n", "let y = r[1\n",
	"let y = r[1:2]\n", "copy rank(r[0]).input[r[1]:r[2]] -> rank(0).output[0]\n",
	"fn f(a, b) = a + b\n", "fn f() = 1\n", "fn f(a,) = 1\n", "fn f(a\n", "fn = 1\n", "fn f(a) a\n", "fn f(1) = 1\n", "x tb 1,\n", "x tb 1@\n", "x ->\n", "a\n(\n", "}", "collective\n", "collective allreduce inplace root 0\n",
}

func TestParserMatchesOracle(t *testing.T) {
	for _, src := range oracleInputs(t) {
		if d := compareWithOracle(src); d != "" {
			t.Errorf("%q: %s", src, d)
		}
	}
}

// BenchmarkParse times the parser that runs (lexer included) against
// participle on the same grammar, its parser built before the clock
// starts (building it is the other cost the hand-written parser removes:
// the "build" sub-benchmark), on the library's all-pairs LL allreduce.
func BenchmarkParse(b *testing.B) {
	src, err := os.ReadFile("../algorithms/allreduce_allpairs_packet.msccl")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("descent", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ds := Parse("p.msccl", src); ds.HasErrors() {
				b.Fatal(ds)
			}
		}
	})
	b.Run("participle", func(b *testing.B) {
		p := oracleParser()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := p.ParseBytes("p.msccl", src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("participle-build", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			participle.MustBuild[File](participle.Lexer(lexer.MustSimple(oracleRules)), participle.Elide("Whitespace", "Comment"), participle.UseLookahead(lookahead))
		}
	})
}
