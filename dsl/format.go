package dsl

import (
	"fmt"
	"strings"
)

// Format prints a parsed program in canonical form: two-space indents,
// one statement per line, single spaces around binary operators, comments
// and single blank lines kept where they were. Formatting is idempotent.
func Format(f *File) []byte {
	p := &printer{comments: f.Comments}
	p.stmts(f.Stmts, 0)
	p.flushComments(1<<30, 0)
	return []byte(p.b.String())
}

type printer struct {
	b        strings.Builder
	comments []Comment
	lastLine int // source line of the last thing printed
}

func (p *printer) indent(depth int) {
	for i := 0; i < depth; i++ {
		p.b.WriteString("  ")
	}
}

// gap prints a blank line when the source had one before line.
func (p *printer) gap(line int) {
	if p.lastLine > 0 && line > p.lastLine+1 {
		p.b.WriteByte('\n')
	}
}

// flushComments prints the comments that start before line.
func (p *printer) flushComments(line, depth int) {
	for len(p.comments) > 0 && p.comments[0].Pos.Line < line {
		c := p.comments[0]
		p.comments = p.comments[1:]
		p.gap(c.Pos.Line)
		p.indent(depth)
		p.b.WriteString(strings.TrimRight(c.Text, " \t"))
		p.b.WriteByte('\n')
		p.lastLine = c.Pos.Line
	}
}

// trailing appends a comment that sits on line after the code.
func (p *printer) trailing(line int) {
	if len(p.comments) > 0 && p.comments[0].Pos.Line == line {
		p.b.WriteString(" ")
		p.b.WriteString(strings.TrimRight(p.comments[0].Text, " \t"))
		p.comments = p.comments[1:]
	}
}

func (p *printer) stmts(ss []*Stmt, depth int) {
	for _, s := range ss {
		p.flushComments(s.Pos.Line, depth)
		p.gap(s.Pos.Line)
		p.indent(depth)
		p.stmt(s, depth)
	}
}

// block prints `{ body }` and the closing line; end is the statement's end.
// open is the source line of the `{` (0 when unknown). Only a comment on
// that line trails the brace: the line before the first statement may be
// a comment of its own, which belongs inside the block, not after `{`.
func (p *printer) block(body []*Stmt, depth int, open, endLine int) {
	p.b.WriteString(" {")
	if len(body) > 0 && open > 0 && open < body[0].Pos.Line {
		p.trailing(open)
	}
	p.b.WriteByte('\n')
	p.lastLine = 0
	if len(body) > 0 {
		p.lastLine = body[0].Pos.Line - 1
	}
	p.stmts(body, depth+1)
	p.flushComments(endLine, depth+1)
	p.indent(depth)
	p.b.WriteString("}")
}

func (p *printer) stmt(s *Stmt, depth int) {
	end := s.EndPos.Line
	switch {
	case s.Collective != nil:
		c := s.Collective
		p.b.WriteString("collective " + c.Kind)
		for _, a := range c.Attrs {
			switch {
			case a.Inplace:
				p.b.WriteString(" inplace")
			case a.Root != nil:
				p.b.WriteString(" root " + ExprString(a.Root))
			case a.Peers != nil:
				p.b.WriteString(" peers " + peerMapString(a.Peers))
			default:
				p.b.WriteString(" chunks " + ExprString(a.Chunks))
			}
		}
	case s.Param != nil:
		p.b.WriteString("param " + s.Param.Name + " = " + ExprString(s.Param.Default))
	case s.Option != nil:
		p.b.WriteString("option " + s.Option.Name + " = " + ExprString(s.Option.Value))
	case s.Let != nil:
		p.b.WriteString("let " + s.Let.Name + " = " + ExprString(s.Let.Value))
	case s.For != nil:
		f := s.For
		fmt.Fprintf(&p.b, "for %s in %s..%s", f.Var, ExprString(f.From), ExprString(f.To))
		if f.Step != nil {
			p.b.WriteString(" step " + ExprString(f.Step))
		}
		p.block(f.Body, depth, s.Pos.Line, endLine(s))
	case s.If != nil:
		p.ifStmt(s.If, depth)
	case s.On != nil:
		fmt.Fprintf(&p.b, "on rank(%s) tb %s", ExprString(s.On.Rank), ExprString(s.On.TB))
		p.block(s.On.Body, depth, s.Pos.Line, endLine(s))
	case s.Pipeline != nil:
		fmt.Fprintf(&p.b, "pipeline unit %s chunks %s", ExprString(s.Pipeline.Unit), ExprString(s.Pipeline.Chunks))
		p.block(s.Pipeline.Body, depth, s.Pos.Line, endLine(s))
	case s.Require != nil:
		p.b.WriteString("require " + ExprString(s.Require.Cond))
		if s.Require.Msg != nil {
			p.b.WriteString(", " + *s.Require.Msg)
		}
	case s.Fn != nil:
		p.b.WriteString("fn " + s.Fn.Name + "(" + strings.Join(s.Fn.Params, ", ") + ") = " + ExprString(s.Fn.Body))
	case s.Op != nil:
		p.b.WriteString(opString(s.Op))
	}
	line := endLine(s)
	p.trailing(line)
	p.b.WriteByte('\n')
	if line > p.lastLine {
		p.lastLine = line
	}
	_ = end
}

func (p *printer) ifStmt(s *IfStmt, depth int) {
	p.b.WriteString("if " + ExprString(s.Cond))
	thenEnd := 1 << 30
	switch {
	case s.ElseIf != nil:
		thenEnd = s.ElseIf.Pos.Line
	case s.Else != nil && len(s.Else) > 0:
		thenEnd = s.Else[0].Pos.Line
	case s.Else != nil:
		thenEnd = s.EndPos.Line
	default:
		thenEnd = s.EndPos.Line + 1
	}
	p.block(s.Then, depth, s.Pos.Line, thenEnd)
	switch {
	case s.ElseIf != nil:
		p.b.WriteString(" else ")
		p.ifStmt(s.ElseIf, depth)
	case s.Else != nil:
		p.b.WriteString(" else")
		// The AST does not keep the line of `else {`; comments before the
		// else body were printed in the then block (thenEnd).
		p.block(s.Else, depth, 0, s.EndPos.Line+1)
	}
}

// endLine is the source line of a statement's last token. participle's
// EndPos points past trailing space, so step back over it.
func endLine(s *Stmt) int {
	if s.EndPos.Line == 0 {
		return s.Pos.Line
	}
	return s.EndPos.Line
}

// opString prints one op statement in canonical form.
func opString(o *OpStmt) string {
	var b strings.Builder
	b.WriteString(o.Name)
	for i, r := range o.Src {
		if i == 0 {
			b.WriteString(" ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(refString(r))
	}
	if o.Arrow {
		b.WriteString(" ->")
		for i, r := range o.Dst {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + refString(r))
		}
	}
	for _, c := range o.Clauses {
		b.WriteString(" " + c.Key)
		for i, a := range c.Args {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + ExprString(a.Value))
			if a.At != nil {
				b.WriteString("@" + ExprString(a.At))
			}
		}
	}
	return b.String()
}

// refString prints a chunk slice.
func refString(r *Ref) string {
	s := fmt.Sprintf("rank(%s).%s[%s", ExprString(r.Rank), r.Buffer, ExprString(r.Lo))
	if r.Hi != nil {
		s += ":" + ExprString(r.Hi)
	}
	return s + "]"
}

// ExprString prints an expression with single spaces around operators.
func ExprString(e *Expr) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(unaryString(e.Head))
	for _, t := range e.Tail {
		b.WriteString(" " + t.Op + " ")
		b.WriteString(unaryString(t.Operand))
	}
	return b.String()
}

func unaryString(u *Unary) string {
	p := u.Prim
	var s string
	switch {
	case p.Int != nil:
		s = *p.Int
	case p.Str != nil:
		s = *p.Str
	case p.Call != nil:
		s = p.Call.Func + "(" + exprsString(p.Call.Args) + ")"
	case p.Ident != nil:
		s = *p.Ident
	case p.Cond != nil:
		s = "if " + ExprString(p.Cond.If) + " then " + ExprString(p.Cond.Then) + " else " + ExprString(p.Cond.Else)
	case p.List != nil:
		s = "[" + exprsString(p.List.Elems) + "]"
	case p.Paren != nil:
		s = "(" + ExprString(p.Paren) + ")"
	}
	if p.Index != nil {
		s += "[" + ExprString(p.Index) + "]"
	}
	return u.Op + s
}

// peerMapString prints a peer map canonically: `r -> EXPR` or `[a, b]`.
func peerMapString(m *PeerMap) string {
	if m.Expr != nil {
		return m.Var + " -> " + ExprString(m.Expr)
	}
	return "[" + exprsString(m.List) + "]"
}

// exprsString prints a comma-separated expression list.
func exprsString(es []*Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = ExprString(e)
	}
	return strings.Join(parts, ", ")
}
