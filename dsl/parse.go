package dsl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// The lexer keeps comments as tokens (elided from the grammar) so that
// Format can put them back; Int accepts size suffixes (64K, 1MiB).
//
// The lexer and the parser are built on first use, not at package init:
// building the parser (reflection over the grammar, regexps) took most of
// a process's start-up, and every command that imports dsl paid it even
// when it never parsed (msccl-compile --version, dump, check).
var lexDef = sync.OnceValue(func() *lexer.StatefulDefinition {
	return lexer.MustSimple(lexRules)
})

var lexRules = []lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*`},
	{Name: "String", Pattern: `"(\\.|[^"\\\n])*"`},
	{Name: "Int", Pattern: `0[xX][0-9a-fA-F]+|[0-9]+(KiB|MiB|GiB|K|M|G)?`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	// Two-character operators come first: the alternation takes the
	// first that matches, and "**" must not lex as two "*".
	{Name: "Op", Pattern: `\.\.|->|==|!=|<=|>=|<<|>>|\*\*|&&|\|\||[-+*/%<>!=^(){}\[\],.:;@]`},
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
}

var parser = sync.OnceValue(func() *participle.Parser[File] {
	return participle.MustBuild[File](
		participle.Lexer(lexDef()),
		participle.Elide("Whitespace", "Comment"),
		participle.UseLookahead(4),
	)
})

// maxSource bounds what Parse accepts so that a hostile input cannot make
// the parser's backtracking take unbounded time.
const maxSource = 4 << 20

// Parse parses a program. It returns the syntax tree (nil when the source
// is not syntactically valid) and every problem found, each positioned at
// filename:line:col. It never panics.
func Parse(filename string, src []byte) (f *File, ds Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			f = nil
			ds = append(ds, Diagnostic{Severity: diag.Error, Code: diag.CodeInternal, Summary: fmt.Sprintf("internal parser error: %v", r),
				Subject: Range{Start: Pos{Filename: filename, Line: 1, Col: 1}}})
		}
	}()
	if len(src) > maxSource {
		return nil, Diagnostics{{Severity: diag.Error, Code: CodeSyntax, Summary: fmt.Sprintf("source is %d bytes; the limit is %d", len(src), maxSource),
			Subject: Range{Start: Pos{Filename: filename, Line: 1, Col: 1}}}}
	}
	comments, lexDiags := scan(filename, src)
	if len(lexDiags) > 0 {
		return nil, lexDiags
	}
	f, err := parser().ParseBytes(filename, src)
	if err != nil {
		return nil, Diagnostics{syntaxDiag(filename, src, err)}
	}
	f.Filename = filename
	f.Comments = comments
	if ds := keywordOps(f.Stmts, nil); len(ds) > 0 {
		return nil, ds
	}
	return f, nil
}

// statementKeywords begin statements of their own. The grammar falls back
// to an op statement when a keyword's statement does not parse
// (`require;` is an op named require), which would compile to an unknown
// op and format into text that parses as something else; say what is
// missing instead.
var statementKeywords = map[string]string{
	"collective": "a collective kind", "param": "a name and a value", "option": "a name and a value",
	"let": "a name and a value", "for": "a range and a body", "if": "a condition and a body",
	"on": "rank(...) tb ... and a body", "pipeline": "unit, chunks and a body",
	"require": "a condition; write e.g. `require ranks % 2 == 0, \"the ring pairs ranks\"`", "else": "a preceding if",
}

// clauseKeywords and otherKeywords are the grammar's other words. An op
// statement cannot be named by one: a clause written as a statement of
// its own (`...; via port`) would format onto the op before it and parse
// as that op's clause, a different program.
var (
	clauseKeywords = []string{"tb", "via", "to", "op", "sem", "tbg", "id", "count"}
	otherKeywords  = []string{"inplace", "chunks", "root", "peers", "in", "step", "unit", "rank"}
)

func keywordOps(ss []*Stmt, ds Diagnostics) Diagnostics {
	for _, s := range ss {
		switch {
		case s.Op != nil:
			p := posOf(s.Op.Pos)
			bad := func(format string, args ...any) {
				ds = append(ds, Diagnostic{Severity: diag.Error, Code: CodeSyntax,
					Summary: fmt.Sprintf(format, args...), Subject: Range{Start: p, End: p}})
			}
			name := s.Op.Name
			switch {
			case statementKeywords[name] != "":
				bad("%s needs %s", name, statementKeywords[name])
			case slices.Contains(clauseKeywords, name):
				bad("%s is a clause of an op, not an op: it goes on the op's own statement (e.g. `put ... via port`)", name)
			case slices.Contains(otherKeywords, name):
				bad("%s is a keyword, not an op", name)
			}
		case s.For != nil:
			ds = keywordOps(s.For.Body, ds)
		case s.On != nil:
			ds = keywordOps(s.On.Body, ds)
		case s.Pipeline != nil:
			ds = keywordOps(s.Pipeline.Body, ds)
		case s.If != nil:
			for i := s.If; i != nil; i = i.ElseIf {
				ds = keywordOps(i.Then, ds)
				ds = keywordOps(i.Else, ds)
			}
		}
	}
	return ds
}

// scan lexes the whole source once up front: every illegal character is
// reported (not just the first), and comments are collected for Format.
func scan(filename string, src []byte) ([]Comment, Diagnostics) {
	var comments []Comment
	var ds Diagnostics
	rest := src
	pos := lexer.Position{Filename: filename, Line: 1, Column: 1}
	comment := lexDef().Symbols()["Comment"]
	for len(rest) > 0 {
		l, err := lexDef().LexString(filename, string(rest))
		if err != nil {
			return nil, Diagnostics{syntaxDiag(filename, src, err)}
		}
		var bad bool
		for {
			tok, err := l.Next()
			if err != nil {
				var pe participle.Error
				p := pos
				if errors.As(err, &pe) {
					p = shift(pos, pe.Position())
				}
				ds = append(ds, Diagnostic{Severity: diag.Error, Code: CodeSyntax, Summary: fmt.Sprintf("invalid character %q", firstRune(src[p.Offset:])),
					Detail:  "the language uses ASCII names, integers, \"strings\", // comments and the operators listed in docs/dsl.md",
					Subject: Range{Start: posOf(p), End: posOf(p)}})
				// Skip the offending character and lex the rest.
				skip := p.Offset + len(string(firstRune(src[p.Offset:]))) - pos.Offset
				adv := pos
				adv.Advance(string(rest[:skip]))
				pos = adv
				rest = rest[skip:]
				bad = true
				break
			}
			if tok.EOF() {
				rest = nil
				break
			}
			if tok.Type == comment {
				p := shift(pos, tok.Pos)
				comments = append(comments, Comment{Pos: posOf(p), Text: tok.Value})
			}
		}
		if len(ds) > 20 {
			break
		}
		_ = bad
	}
	return comments, ds
}

// shift turns a position relative to a sub-lexer started at base into an
// absolute one.
func shift(base, rel lexer.Position) lexer.Position {
	p := lexer.Position{Filename: base.Filename, Offset: base.Offset + rel.Offset}
	if rel.Line == 1 {
		p.Line, p.Column = base.Line, base.Column+rel.Column-1
	} else {
		p.Line, p.Column = base.Line+rel.Line-1, rel.Column
	}
	return p
}

func firstRune(b []byte) rune {
	for _, r := range string(b) {
		return r
	}
	return 0
}

func syntaxDiag(filename string, src []byte, err error) Diagnostic {
	var pe participle.Error
	if !errors.As(err, &pe) {
		return Diagnostic{Severity: diag.Error, Code: CodeSyntax, Summary: "syntax error: " + err.Error(), Subject: Range{Start: Pos{Filename: filename, Line: 1, Col: 1}}}
	}
	p := posOf(pe.Position())
	if p.Filename == "" {
		p.Filename = filename
	}
	msg := pe.Message()
	var ut *participle.UnexpectedTokenError
	detail := ""
	if errors.As(err, &ut) {
		tok := ut.Unexpected
		if tok.EOF() {
			msg = "unexpected end of file"
			detail = "a block or statement is not finished; check for a missing \"}\" or operand"
		} else {
			msg = fmt.Sprintf("unexpected %q", tok.Value)
			if ut.Expect != "" {
				detail = "expected " + ut.Expect
			}
			if tok.Value == "=" {
				o := tok.Pos.Offset
				if o+1 < len(src) && src[o+1] == '>' {
					detail = `did you mean "->"? (SRC -> DST)`
				} else {
					detail = "use \"let NAME = ...\" to bind a name; comparisons are written \"==\""
				}
			}
		}
	}
	msg = strings.TrimPrefix(msg, "unexpected token ")
	return Diagnostic{Severity: diag.Error, Code: CodeSyntax, Summary: "syntax error: " + msg, Detail: detail, Subject: Range{Start: p, End: p}}
}
