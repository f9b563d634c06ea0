package dsl

import (
	"fmt"
	"slices"

	"github.com/msccl-go/msccl-go/internal/diag"
)

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
	d, comments, lexDiags := lex(filename, src)
	if len(lexDiags) > 0 {
		return nil, lexDiags
	}
	f, err := d.parseFile()
	if ms := d.misspellingDiags(); len(ms) > 0 {
		// The cause, rather than what it made of the rest of the line.
		return nil, ms
	}
	if err != nil {
		return nil, Diagnostics{syntaxDiag(src, err)}
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
	"fn": "a name, (parameters) and = EXPR; write e.g. `fn peer(r, k) = r ^ (1 << k)`",
}

// clauseKeywords and otherKeywords are the grammar's other words. An op
// statement cannot be named by one: a clause written as a statement of
// its own (`...; via port`) would format onto the op before it and parse
// as that op's clause, a different program.
var (
	clauseKeywords = []string{"tb", "via", "to", "op", "sem", "tbg", "id", "count"}
	otherKeywords  = []string{"inplace", "chunks", "root", "peers", "in", "step", "unit", "rank", "then"}
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

func syntaxDiag(src []byte, e *syntaxError) Diagnostic {
	p := posOf(e.pos)
	msg, detail := "unexpected end of file", "a block or statement is not finished; check for a missing \"}\" or operand"
	if !e.eof {
		msg, detail = fmt.Sprintf("unexpected %q", e.val), ""
		if e.expect != "" {
			detail = "expected " + e.expect
		}
		if e.val == "=" {
			o := e.pos.Offset
			if o+1 < len(src) && src[o+1] == '>' {
				detail = `did you mean "->"? (SRC -> DST)`
			} else {
				detail = "use \"let NAME = ...\" to bind a name; comparisons are written \"==\""
			}
		}
	}
	return Diagnostic{Severity: diag.Error, Code: CodeSyntax, Summary: "syntax error: " + msg, Detail: detail, Subject: Range{Start: p, End: p}}
}
