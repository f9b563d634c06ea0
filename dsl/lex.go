package dsl

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// The lexer is written out by hand rather than built from regular
// expressions: building participle's regexp lexer and reflected parser
// took about 4 ms of every compile's process (docs/BENCHMARKS.md,
// "msccl-compile start-up"). It accepts exactly the tokens of the rules
// below, tried in this order at each position, each the longest match of
// its first matching alternative (the semantics of participle's simple
// lexer, which the tests run beside it):
//
//	Comment     //[^\n]*
//	String      "(\\.|[^"\\\n])*"
//	Int         0[xX][0-9a-fA-F]+|[0-9]+(KiB|MiB|GiB|K|M|G)?
//	Ident       [A-Za-z_][A-Za-z0-9_]*
//	Op          \.\.|->|==|!=|<=|>=|<<|>>|\*\*|&&|\|\||[-+*/%<>!=^&|~(){}\[\],.:;@]
//	Whitespace  [ \t\r\n]+
//
// Comments and whitespace are not handed to the parser; comments are kept
// for Format.

// tokKind is a token's rule; EOF ends every token list.
type tokKind uint8

const (
	tEOF tokKind = iota
	tInt
	tString
	tIdent
	tOp
)

// token is one token the parser sees: where its text starts and ends in
// the source, with the line and column of each (a node's Pos and EndPos).
// It holds no pointers and packs into 28 bytes: a 4 MiB source of
// one-character tokens is millions of them, and a slice of pointer-holding
// structs that size cost the lexer seconds in copying and scanning.
type token struct {
	kind            tokKind
	off, endOff     int32
	line, col       int32
	endLine, endCol int32
}

// maxLexErrors bounds the invalid characters reported for one file.
const maxLexErrors = 21

// lex splits src into the parser's tokens (ending with EOF) and the
// comments. Every invalid character is reported, not just the first (up
// to maxLexErrors), each skipped so the rest is still checked. src must
// be at most maxSource bytes (offsets are int32).
func lex(filename string, src []byte) (*descent, []Comment, Diagnostics) {
	s := string(src)
	toks := make([]token, 0, len(s)/4+1)
	var comments []Comment
	var ds Diagnostics
	pos := lexer.Position{Filename: filename, Line: 1, Column: 1}
	for i := 0; i < len(s); {
		n, kind := tokenAt(s, i)
		if n == 0 {
			r, w := utf8.DecodeRuneInString(s[i:])
			p := posOf(pos)
			ds = append(ds, Diagnostic{Severity: diag.Error, Code: CodeSyntax, Summary: fmt.Sprintf("invalid character %q", r),
				Detail:  "the language uses ASCII names, integers, \"strings\", // comments and the operators listed in docs/dsl.md",
				Subject: Range{Start: p, End: p}})
			if len(ds) >= maxLexErrors {
				return nil, nil, ds
			}
			advance(&pos, s[i:i+w])
			i += w
			continue
		}
		span := s[i : i+n]
		start := pos
		advance(&pos, span)
		i += n
		switch kind {
		case tComment:
			comments = append(comments, Comment{Pos: posOf(start), Text: span})
		case tSpace:
		default:
			toks = append(toks, token{kind: kind, off: int32(start.Offset), endOff: int32(pos.Offset),
				line: int32(start.Line), col: int32(start.Column), endLine: int32(pos.Line), endCol: int32(pos.Column)})
		}
	}
	if len(ds) > 0 {
		return nil, nil, ds
	}
	end := int32(pos.Offset)
	toks = append(toks, token{kind: tEOF, off: end, endOff: end, line: int32(pos.Line), col: int32(pos.Column), endLine: int32(pos.Line), endCol: int32(pos.Column)})
	return &descent{file: filename, src: s, toks: toks}, comments, nil
}

// The kinds the parser never sees.
const (
	tComment tokKind = iota + 100
	tSpace
)

// advance moves p over span as participle's Position.Advance does:
// columns count runes, a newline starts column 1.
func advance(p *lexer.Position, span string) {
	if nl := strings.LastIndexByte(span, '\n'); nl >= 0 {
		p.Offset += len(span)
		p.Line += strings.Count(span, "\n")
		p.Column = utf8.RuneCountInString(span[nl:])
		return
	}
	p.Offset += len(span)
	p.Column += utf8.RuneCountInString(span)
}

// tokenAt returns the length and kind of the token at s[i:], 0 when no
// rule matches there.
func tokenAt(s string, i int) (int, tokKind) {
	c := s[i]
	at := func(j int) byte {
		if j < len(s) {
			return s[j]
		}
		return 0
	}
	switch {
	case c == '/' && at(i+1) == '/':
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return len(s) - i, tComment
		}
		return j, tComment
	case c == '"':
		// Byte by byte is exact: a multi-byte rune's bytes are never '"',
		// '\\' or '\n'.
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '"':
				return j + 1 - i, tString
			case '\n':
				return 0, 0
			case '\\':
				if j+1 >= len(s) || s[j+1] == '\n' {
					return 0, 0
				}
				j++
			}
		}
		return 0, 0
	case isDigit(c):
		if c == '0' && (at(i+1) == 'x' || at(i+1) == 'X') && isHex(at(i+2)) {
			j := i + 2
			for j < len(s) && isHex(s[j]) {
				j++
			}
			return j - i, tInt
		}
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		for _, suf := range [...]string{"KiB", "MiB", "GiB", "K", "M", "G"} {
			if strings.HasPrefix(s[j:], suf) {
				j += len(suf)
				break
			}
		}
		return j - i, tInt
	case isIdentStart(c):
		j := i + 1
		for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
			j++
		}
		return j - i, tIdent
	case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		j := i + 1
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - i, tSpace
	}
	if i+1 < len(s) {
		switch s[i : i+2] {
		case "..", "->", "==", "!=", "<=", ">=", "<<", ">>", "**", "&&", "||":
			return 2, tOp
		}
	}
	if strings.IndexByte("-+*/%<>!=^&|~(){}[],.:;@", c) >= 0 {
		return 1, tOp
	}
	return 0, 0
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isHex(c byte) bool        { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }
func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
