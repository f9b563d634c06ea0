package dsl

import (
	"fmt"

	"github.com/alecthomas/participle/v2/lexer"
)

// The parser is recursive descent over the grammar that ast.go's struct
// tags spell. It is written out rather than reflected from the tags by
// participle at run time, which cost a compile process about 7 ms (building
// the parser, then a first parse through reflection): see docs/rationale.md,
// "Why is the parser written by hand". It keeps participle's semantics so
// that the tags stay the grammar's definition (the tests run participle
// on them beside this parser, dsl/oracle_test.go):
//
//   - alternatives are tried in order; the first that matches wins;
//   - an optional or repeated part, or an alternative, that fails after
//     consuming at most `lookahead` tokens is backed out (the optional
//     counts as absent, the next alternative is tried); one that fails
//     deeper fails its parent;
//   - the error reported is the deepest one met (by token index; the later
//     one on a tie): the further the parser got, the closer the error is
//     to the mistake;
//   - a node's Pos is its first token's, its EndPos the position just past
//     its last token.
const lookahead = 4

// syntaxError is an unexpected token: where, and what the parser wanted
// there ("" when anything else would have done as well).
type syntaxError struct {
	eof    bool
	val    string
	pos    lexer.Position
	idx    int
	expect string
	fatal  bool // never backed out (too deep a nesting)
}

func (e *syntaxError) Error() string { return "unexpected " + e.val }

type descent struct {
	file    string // file name, for positions
	src     string
	toks    []token
	i       int
	deepest *syntaxError
	depth   int // open parentheses, calls and blocks
	// aliases are the tokens (by offset) that read as a keyword while a
	// misspelled keyword is tried (misspelled.go); nil outside a trial.
	aliases map[int32]alias
	// misspelled are the statement names found to be misspelled
	// keywords, fixed their tokens, read as the keywords from then on;
	// near caches nearKeyword.
	misspelled []misspelling
	fixed      map[int32]string
	near       map[string]string
}

// maxDepth bounds nesting: a recursive parser on a hostile input of a
// million "(" would otherwise overflow the goroutine stack, a crash no
// recover catches.
const maxDepth = 1000

// nest enters one level of nesting; the caller defers p.depth--.
func (p *descent) nest() *syntaxError {
	p.depth++
	if p.depth > maxDepth {
		e := p.fail(fmt.Sprintf("at most %d levels of nesting", maxDepth))
		e.fatal = true
		p.deepest = e
		return e
	}
	return nil
}

func (p *descent) peek() *token { return &p.toks[p.i] }

func (p *descent) val(t *token) string {
	if p.aliases != nil {
		if a, ok := p.aliases[t.off]; ok {
			return a.kw
		}
	}
	if p.fixed != nil {
		if kw, ok := p.fixed[t.off]; ok {
			return kw
		}
	}
	return p.src[t.off:t.endOff]
}

func (p *descent) pos(t *token) lexer.Position {
	return lexer.Position{Filename: p.file, Offset: int(t.off), Line: int(t.line), Column: int(t.col)}
}

func (p *descent) end(t *token) lexer.Position {
	return lexer.Position{Filename: p.file, Offset: int(t.endOff), Line: int(t.endLine), Column: int(t.endCol)}
}

// last is the last consumed token's end: the EndPos of a node just parsed.
func (p *descent) last() lexer.Position { return p.end(&p.toks[p.i-1]) }

// fail records an error at the current token.
func (p *descent) fail(expect string) *syntaxError {
	t := &p.toks[p.i]
	e := &syntaxError{eof: t.kind == tEOF, val: p.val(t), pos: p.pos(t), idx: p.i, expect: expect}
	p.note(e)
	return e
}

func (p *descent) note(e *syntaxError) {
	if p.deepest == nil || e.idx >= p.deepest.idx {
		p.deepest = e
	}
}

// is reports whether the current token is the literal s (any kind: the
// keywords are Ident tokens).
func (p *descent) is(s string) bool {
	t := &p.toks[p.i]
	return t.kind != tEOF && p.val(t) == s
}

// accept consumes the literal s if it is next.
func (p *descent) accept(s string) bool {
	if p.is(s) {
		p.i++
		return true
	}
	return false
}

func (p *descent) expect(s string) *syntaxError {
	if p.accept(s) {
		return nil
	}
	return p.fail(`"` + s + `"`)
}

// kind consumes a token of kind k and returns its text.
func (p *descent) kind(k tokKind, what string) (string, *syntaxError) {
	t := &p.toks[p.i]
	if t.kind != k {
		return "", p.fail(what)
	}
	p.i++
	return p.val(t), nil
}

// backOut decides what a failed optional part, repetition item or
// alternative that began at start does: within the lookahead it is backed
// out (nil: the caller goes on as if it were absent), deeper the error
// stands.
func (p *descent) backOut(start int, err *syntaxError) *syntaxError {
	if err.idx > start+lookahead || err.fatal {
		return err
	}
	p.i = start
	return nil
}

// file = stmt* EOF
func (p *descent) parseFile() (*File, *syntaxError) {
	ss, err := p.stmts()
	if err == nil && p.peek().kind != tEOF {
		err = p.fail("")
	}
	if err != nil && !err.fatal {
		// The deepest error met, which may be in a part that was backed
		// out: the further the parse got, the nearer the mistake.
		err = p.deepest
	}
	if err != nil {
		return nil, err
	}
	return &File{Stmts: ss}, nil
}

// stmts = stmt*: statements until one does not start (or is backed out).
func (p *descent) stmts() ([]*Stmt, *syntaxError) { return many(p, p.stmt) }

// body = "{" stmt* "}"
func (p *descent) body() ([]*Stmt, *syntaxError) {
	defer func() { p.depth-- }()
	if err := p.nest(); err != nil {
		return nil, err
	}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	ss, err := p.stmts()
	if err != nil {
		return nil, err
	}
	if err := p.expect("}"); err != nil {
		return nil, err
	}
	return ss, nil
}

// stmt = (collective | param | option | let | for | if | on | pipeline |
// require | fn | op) ";"?
//
// A keyword statement that fails within the lookahead falls back to an op
// of that name, as participle's alternatives do; keywordOps then names
// the keyword.
func (p *descent) stmt() (*Stmt, *syntaxError) {
	t := p.peek()
	if t.kind != tIdent {
		return nil, nil
	}
	s := &Stmt{Pos: p.pos(t)}
	start := p.i
	keyword, err := p.keywordStmt(s, p.val(t))
	if !keyword {
		keyword, err = p.misspelledKeyword(s, start)
	}
	if keyword && err != nil {
		if err = p.backOut(start, err); err != nil {
			return nil, err
		}
		*s = Stmt{Pos: p.pos(t)}
		keyword = false
	}
	if !keyword {
		if s.Op, err = p.op(); err != nil {
			return nil, err
		}
	}
	p.accept(";")
	s.EndPos = p.last()
	return s, nil
}

// keywordStmt parses the statement that keyword kw begins into s; false
// when kw is no statement keyword.
func (p *descent) keywordStmt(s *Stmt, kw string) (bool, *syntaxError) {
	t := p.peek()
	var err *syntaxError
	switch kw {
	case "collective":
		s.Collective, err = p.collective()
	case "param":
		s.Param = &ParamStmt{Pos: p.pos(t)}
		s.Param.Name, s.Param.Default, err = p.binding("param")
		s.Param.EndPos = p.endIf(err)
	case "option":
		s.Option = &OptionStmt{Pos: p.pos(t)}
		s.Option.Name, s.Option.Value, err = p.binding("option")
		s.Option.EndPos = p.endIf(err)
	case "let":
		s.Let = &LetStmt{Pos: p.pos(t)}
		s.Let.Name, s.Let.Value, err = p.binding("let")
		s.Let.EndPos = p.endIf(err)
	case "for":
		s.For, err = p.forStmt()
	case "if":
		s.If, err = p.ifStmt()
	case "on":
		s.On, err = p.onStmt()
	case "pipeline":
		s.Pipeline, err = p.pipeline()
	case "require":
		s.Require, err = p.require()
	case "fn":
		s.Fn, err = p.fnStmt()
	default:
		return false, nil
	}
	return true, err
}

func (p *descent) endIf(err *syntaxError) lexer.Position {
	if err != nil {
		return lexer.Position{}
	}
	return p.last()
}

// binding = KEYWORD Ident "=" expr (param, option, let)
func (p *descent) binding(kw string) (string, *Expr, *syntaxError) {
	p.i++ // the keyword
	name, err := p.kind(tIdent, "a name")
	if err != nil {
		return "", nil, err
	}
	if err := p.expect("="); err != nil {
		return "", nil, err
	}
	e, err := p.needExpr()
	return name, e, err
}

// collective = "collective" Ident attr*
func (p *descent) collective() (*CollectiveStmt, *syntaxError) {
	c := &CollectiveStmt{}
	return node(p, c, &c.Pos, &c.EndPos, "collective", ident{&c.Kind, "a collective kind"}, &c.Attrs)
}

// attr = "inplace" | "chunks" expr | "root" expr | "peers" peerMap
func (p *descent) collectiveAttr() (*CollectiveAttr, *syntaxError) {
	a := &CollectiveAttr{Pos: p.pos(p.peek())}
	var err *syntaxError
	switch {
	case p.accept("inplace"):
		a.Inplace = true
	case p.accept("chunks"):
		a.Chunks, err = p.needExpr()
	case p.accept("root"):
		a.Root, err = p.needExpr()
	case p.accept("peers"):
		a.Peers, err = p.peerMap()
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	a.EndPos = p.last()
	return a, nil
}

// peerMap = Ident "->" expr | "[" expr ("," expr)* "]"
func (p *descent) peerMap() (*PeerMap, *syntaxError) {
	m := &PeerMap{Pos: p.pos(p.peek())}
	var first *syntaxError
	if t := p.peek(); t.kind == tIdent {
		start := p.i
		err := func() *syntaxError {
			p.i++
			if err := p.expect("->"); err != nil {
				return err
			}
			var err *syntaxError
			m.Expr, err = p.needExpr()
			return err
		}()
		if err == nil {
			m.Var = p.val(t)
			m.EndPos = p.last()
			return m, nil
		}
		if stop := p.backOut(start, err); stop != nil {
			return nil, stop
		}
		m.Expr, first = nil, err
	}
	if p.is("[") {
		if err := p.seq("[", &m.List, "]"); err != nil {
			return nil, err
		}
		m.EndPos = p.last()
		return m, nil
	}
	if first != nil {
		return nil, first
	}
	return nil, p.fail(`a rank variable "r -> ..." or a list "[...]"`)
}

// for = "for" Ident "in" expr ".." expr ("step" expr)? body
func (p *descent) forStmt() (*ForStmt, *syntaxError) {
	f := &ForStmt{}
	return node(p, f, &f.Pos, &f.EndPos, "for", ident{&f.Var, "a name"}, "in", &f.From, "..", &f.To, opt{"step", &f.Step}, &f.Body)
}

// if = "if" expr body ("else" (if | body))?
func (p *descent) ifStmt() (*IfStmt, *syntaxError) {
	s := &IfStmt{Pos: p.pos(p.peek())}
	if err := p.seq("if", &s.Cond, &s.Then); err != nil {
		return nil, err
	}
	p.misspelledElse()
	if start := p.i; p.accept("else") {
		var err *syntaxError
		if p.is("if") {
			s.ElseIf, err = p.ifStmt()
		} else if p.is("{") {
			s.Else, err = p.body()
		} else {
			err = p.fail(`"if" or "{"`)
		}
		if err != nil {
			s.ElseIf, s.Else = nil, nil
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
		}
	}
	s.EndPos = p.last()
	return s, nil
}

// on = "on" "rank" "(" expr ")" "tb" expr body
func (p *descent) onStmt() (*OnStmt, *syntaxError) {
	o := &OnStmt{}
	return node(p, o, &o.Pos, &o.EndPos, "on", "rank", "(", &o.Rank, ")", "tb", &o.TB, &o.Body)
}

// pipeline = "pipeline" "unit" expr "chunks" expr body
func (p *descent) pipeline() (*PipelineStmt, *syntaxError) {
	s := &PipelineStmt{}
	return node(p, s, &s.Pos, &s.EndPos, "pipeline", "unit", &s.Unit, "chunks", &s.Chunks, &s.Body)
}

// fn = "fn" Ident "(" (Ident ("," Ident)*)? ")" "=" expr
func (p *descent) fnStmt() (*FnStmt, *syntaxError) {
	f := &FnStmt{Pos: p.pos(p.peek())}
	if err := p.seq("fn", ident{&f.Name, "a function name"}, "("); err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tIdent {
		p.i++
		f.Params = append(f.Params, p.val(t))
		for {
			start := p.i
			if !p.accept(",") {
				break
			}
			name, err := p.kind(tIdent, "a parameter name")
			if err != nil {
				if err = p.backOut(start, err); err != nil {
					return nil, err
				}
				break
			}
			f.Params = append(f.Params, name)
		}
	}
	if err := p.seq(")", "=", &f.Body); err != nil {
		return nil, err
	}
	f.EndPos = p.last()
	return f, nil
}

// require = "require" expr ("," String)?
func (p *descent) require() (*RequireStmt, *syntaxError) {
	s := &RequireStmt{Pos: p.pos(p.peek())}
	if err := p.seq("require", &s.Cond); err != nil {
		return nil, err
	}
	if start := p.i; p.accept(",") {
		msg, err := p.kind(tString, "a \"message\"")
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
		} else {
			s.Msg = &msg
		}
	}
	s.EndPos = p.last()
	return s, nil
}

// op = Ident (ref ("," ref)*)? ("->" ref ("," ref)*)? clause*
func (p *descent) op() (*OpStmt, *syntaxError) {
	o := &OpStmt{Pos: p.pos(p.peek())}
	var err *syntaxError
	if o.Name, err = p.kind(tIdent, "a statement"); err != nil {
		return nil, err
	}
	start := p.i
	if o.Src, err = p.refList(); err != nil {
		if err = p.backOut(start, err); err != nil {
			return nil, err
		}
		o.Src = nil
	}
	if start := p.i; p.accept("->") {
		if o.Dst, err = p.refList(); err == nil && o.Dst == nil {
			err = p.fail("a buffer reference rank(...).BUFFER[...]")
		}
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			o.Dst = nil
		} else {
			o.Arrow = true
		}
	}
	if o.Clauses, err = many(p, p.clause); err != nil {
		return nil, err
	}
	o.EndPos = p.last()
	return o, nil
}
