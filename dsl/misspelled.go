package dsl

import (
	"fmt"
	"slices"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/textdist"
)

// A misspelled statement keyword (`fro r in 0..4 { ... }`, `parm ranks =
// 8`) is, to the grammar, an op statement named fro followed by
// whatever comes next, so the parser's own error lands later on the line
// ("unexpected \"=\"") or nowhere at all (`colective allreduce` is two
// ops). When a statement begins with a name close to a keyword, the
// parser tries the rest of it as that keyword's statement; if that
// parses, the name was the keyword misspelled, and Parse reports it at
// the name instead of the error the misspelling caused. The statement is
// then parsed as the keyword's, so that the rest of the file is checked
// too (a second misspelling is found, not lost in the first one's
// wreckage). Such a file is an error whatever the grammar makes of it,
// so the oracle tests, which hold the parser to participle's trees, skip
// it.

// stmtKeywords are the keywords that begin a statement of their own.
var stmtKeywords = []string{"collective", "param", "option", "let", "for", "if", "on", "pipeline", "require", "fn"}

// misspelling is a statement name that parses as keyword kw.
type misspelling struct {
	idx      int // token index of the name
	name, kw string
}

// alias is a token read as keyword kw during a trial.
type alias struct {
	idx int
	kw  string
}

// nearKeyword returns the statement keyword name is probably a
// misspelling of, "" when none is close enough: an edit distance below
// diag.Suggest's threshold, the nearest (then the first listed) winning.
func (p *descent) nearKeyword(name string) string {
	if kw, ok := p.near[name]; ok {
		return kw
	}
	best, bestD := "", min(len(name)/2+2, 3)
	if !slices.Contains(stmtKeywords, name) {
		for _, kw := range stmtKeywords {
			if d := textdist.Levenshtein(name, kw); d < bestD {
				best, bestD = kw, d
			}
		}
	}
	if p.near == nil {
		p.near = map[string]string{}
	}
	p.near[name] = best
	return best
}

// misspelledKeyword handles a statement at token start whose name is no
// keyword. Outside a trial it tries the statement as the keyword its
// name is near; when that parses it records the misspelling (and any met
// inside it) and parses the statement as the keyword's into s (true),
// else it restores the parser and returns false: the statement is then
// an op, as the grammar says. Inside a trial, a statement
// whose name is near a keyword is parsed as that keyword when it can be
// (true, s filled in), so that a misspelled loop inside a misspelled
// loop does not fail its parent's trial; each statement is then tried at
// most twice, so trials stay linear in the input.
func (p *descent) misspelledKeyword(s *Stmt, start int) (bool, *syntaxError) {
	t := &p.toks[start]
	name := p.val(t)
	kw := p.nearKeyword(name)
	if kw == "" || !p.couldBe(kw, start) {
		return false, nil
	}
	i, deepest, depth := p.i, p.deepest, p.depth
	if p.aliases != nil {
		p.aliases[t.off] = alias{start, kw}
		if _, err := p.keywordStmt(s, kw); err == nil {
			return true, nil
		}
		delete(p.aliases, t.off)
		*s = Stmt{Pos: s.Pos}
		p.i, p.depth = i, depth
		return false, nil
	}
	p.aliases = map[int32]alias{t.off: {start, kw}}
	_, err := p.keywordStmt(&Stmt{}, kw)
	found := p.aliases
	p.aliases = nil
	p.i, p.deepest, p.depth = i, deepest, depth
	if err != nil {
		return false, nil
	}
	if p.fixed == nil {
		p.fixed = map[int32]string{}
	}
	for off, a := range found {
		p.misspelled = append(p.misspelled, misspelling{idx: a.idx, name: p.val(&p.toks[a.idx]), kw: a.kw})
		p.fixed[off] = a.kw
	}
	slices.SortFunc(p.misspelled, func(a, b misspelling) int { return a.idx - b.idx })
	return p.keywordStmt(s, kw)
}

// misspelledElse, after an if's body, takes a word near "else" followed
// by "{" or "if" (`} esle {`) as else misspelled: it is recorded (or,
// inside a trial, aliased) so that the if statement goes on, and the
// file is reported at the word. The grammar would make it an op named
// esle and stop at the "{" after it.
func (p *descent) misspelledElse() {
	t := p.peek()
	if t.kind != tIdent || p.val(t) == "else" || len(p.val(t)) > 6 || textdist.Levenshtein(p.val(t), "else") > 2 {
		return
	}
	if next := &p.toks[p.i+1]; next.kind == tEOF || (p.val(next) != "{" && p.val(next) != "if") {
		return
	}
	if p.aliases != nil {
		p.aliases[t.off] = alias{p.i, "else"}
		return
	}
	p.misspelled = append(p.misspelled, misspelling{idx: p.i, name: p.val(t), kw: "else"})
	if p.fixed == nil {
		p.fixed = map[int32]string{}
	}
	p.fixed[t.off] = "else"
}

// couldBe says whether the tokens after start can continue a kw
// statement: a cheap test that spares the common ops near a keyword (nop,
// get, put) a trial.
func (p *descent) couldBe(kw string, start int) bool {
	next := func(k int) *token { return &p.toks[min(start+k, len(p.toks)-1)] }
	isIdent := func(k int) bool { return next(k).kind == tIdent }
	is := func(k int, lit string) bool { t := next(k); return t.kind != tEOF && p.src[t.off:t.endOff] == lit }
	// A misspelled keyword has its first argument on its own line: a
	// name alone on a line is an op with no operands (`requr` then `A`
	// on the next line are two ops, as `requr; A` is), never a keyword
	// whose statement runs on into the next line.
	if next(1).kind == tEOF || next(1).line != p.toks[start].line {
		return false
	}
	switch kw {
	case "collective":
		return isIdent(1)
	case "param", "option", "let":
		return isIdent(1) && is(2, "=")
	case "for":
		return isIdent(1) && is(2, "in")
	case "fn":
		return isIdent(1) && is(2, "(")
	case "on":
		return is(1, "rank")
	case "pipeline":
		return is(1, "unit")
	}
	return next(1).kind != tEOF
}

// maxMisspellings bounds the misspellings reported for one file.
const maxMisspellings = 20

// misspellingDiags are the misspellings found, in source order.
func (p *descent) misspellingDiags() Diagnostics {
	var ds Diagnostics
	for _, m := range p.misspelled[:min(len(p.misspelled), maxMisspellings)] {
		at := posOf(p.pos(&p.toks[m.idx]))
		ds = append(ds, Diagnostic{Severity: diag.Error, Code: CodeSyntax,
			Summary: fmt.Sprintf("unknown statement %q", m.name), Detail: fmt.Sprintf("did you mean %q?", m.kw),
			Subject: Range{Start: at, End: posOf(p.end(&p.toks[m.idx]))}})
	}
	return ds
}
