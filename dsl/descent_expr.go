package dsl

// The expression, buffer-reference and clause rules of the parser
// (descent.go has the statements and the rules every rule follows,
// descent_parts.go the parts rules are made of).

// exprList = expr ("," expr)*.
func (p *descent) exprList() ([]*Expr, *syntaxError) { return commaList(p, p.needExpr, p.needExpr) }

// refList = ref ("," ref)*; nil when no ref starts here.
func (p *descent) refList() ([]*Ref, *syntaxError) { return commaList(p, p.ref, p.needRef) }

// needRef parses a buffer reference that must be there.
func (p *descent) needRef() (*Ref, *syntaxError) {
	return need(p, p.ref, "a buffer reference rank(...).BUFFER[...]")
}

// ref = "rank" "(" expr ")" "." Ident "[" expr (":" expr)? "]"
func (p *descent) ref() (*Ref, *syntaxError) {
	if !p.is("rank") {
		return nil, nil
	}
	r := &Ref{}
	return node(p, r, &r.Pos, &r.EndPos, "rank", "(", &r.Rank, ")", ".", ident{&r.Buffer, "a buffer name"}, "[", &r.Lo, opt{":", &r.Hi}, "]")
}

var clauseKeys = map[string]bool{"tb": true, "via": true, "to": true, "op": true, "sem": true, "tbg": true, "id": true, "count": true}

// clause = ("tb" | "via" | "to" | "op" | "sem" | "tbg" | "id" | "count") arg ("," arg)*
func (p *descent) clause() (*Clause, *syntaxError) {
	t := p.peek()
	if t.kind == tEOF || !clauseKeys[p.val(t)] {
		return nil, nil
	}
	c := &Clause{Key: p.val(t)}
	return node(p, c, &c.Pos, &c.EndPos, c.Key, &c.Args)
}

// arg = expr ("@" expr)?
func (p *descent) arg() (*Arg, *syntaxError) {
	a := &Arg{Pos: p.pos(p.peek())}
	if err := p.seq(&a.Value, opt{"@", &a.At}); err != nil {
		return nil, err
	}
	return a, nil
}

// binOps are the infix operators of an Expr chain.
var binOps = map[string]bool{"||": true, "&&": true, "==": true, "!=": true, "<=": true, ">=": true, "<<": true, ">>": true,
	"<": true, ">": true, "+": true, "-": true, "^": true, "&": true, "|": true, "**": true, "*": true, "/": true, "%": true}

// needExpr parses an expression that must be there.
func (p *descent) needExpr() (*Expr, *syntaxError) { return need(p, p.expr, "an expression") }

// expr = unary (binop unary)*; nil when no expression starts here.
func (p *descent) expr() (*Expr, *syntaxError) {
	e := &Expr{Pos: p.pos(p.peek())}
	var err *syntaxError
	if e.Head, err = p.unary(); e.Head == nil || err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp || !binOps[p.val(t)] {
			break
		}
		start := p.i
		p.i++
		u, err := need(p, p.unary, "an operand")
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			break
		}
		e.Tail = append(e.Tail, &BinTail{Op: p.val(t), Operand: u})
	}
	e.EndPos = p.last()
	return e, nil
}

// unary = ("-" | "!" | "~")? primary
func (p *descent) unary() (*Unary, *syntaxError) {
	u := &Unary{Pos: p.pos(p.peek())}
	if p.is("-") || p.is("!") || p.is("~") {
		u.Op = p.val(p.peek())
		p.i++
		prim, err := need(p, p.primary, "an operand")
		if err != nil {
			return nil, err
		}
		u.Prim = prim
		return u, nil
	}
	prim, err := p.primary()
	if prim == nil || err != nil {
		return nil, err
	}
	u.Prim = prim
	return u, nil
}

// primary = (Int | String | cond | call | Ident | list | "(" expr ")")
// ("[" expr "]")?
func (p *descent) primary() (*Primary, *syntaxError) {
	t := p.peek()
	pr := &Primary{Pos: p.pos(t)}
	switch t.kind {
	case tInt:
		p.i++
		v := p.val(t)
		pr.Int = &v
	case tString:
		p.i++
		v := p.val(t)
		pr.Str = &v
	case tIdent:
		// `if` is a name where no conditional follows, a name followed
		// by "(" one where no call does (participle's alternatives: the
		// conditional, then the call, are tried first).
		if p.val(t) == "if" {
			c, err := attempt(p, p.cond)
			if err != nil {
				return nil, err
			}
			if pr.Cond = c; c != nil {
				break
			}
		}
		if p.toks[p.i+1].kind == tOp && p.val(&p.toks[p.i+1]) == "(" {
			c, err := attempt(p, p.call)
			if err != nil {
				return nil, err
			}
			if pr.Call = c; c != nil {
				break
			}
		}
		p.i++
		v := p.val(t)
		pr.Ident = &v
	default:
		switch {
		case p.is("["):
			l, err := p.list()
			if err != nil {
				return nil, err
			}
			pr.List = l
		case p.is("("):
			if err := p.nested(func() *syntaxError { return p.seq("(", &pr.Paren, ")") }); err != nil {
				return nil, err
			}
		default:
			return nil, nil
		}
	}
	if start := p.i; p.is("[") {
		if err := p.nested(func() *syntaxError { return p.seq("[", &pr.Index, "]") }); err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			pr.Index = nil
		}
	}
	pr.EndPos = p.last()
	return pr, nil
}

// nested runs a rule one level of nesting deeper (see maxDepth).
func (p *descent) nested(rule func() *syntaxError) *syntaxError {
	defer func() { p.depth-- }()
	if err := p.nest(); err != nil {
		return err
	}
	return rule()
}

// cond = "if" expr "then" expr "else" expr
func (p *descent) cond() (*Cond, *syntaxError) {
	c := &Cond{Pos: p.pos(p.peek())}
	err := p.nested(func() *syntaxError { return p.seq("if", &c.If, "then", &c.Then, "else", &c.Else) })
	if err != nil {
		return nil, err
	}
	return c, nil
}

// list = "[" (expr ("," expr)*)? "]"
func (p *descent) list() (*ListLit, *syntaxError) {
	l := &ListLit{Pos: p.pos(p.peek())}
	err := p.nested(func() *syntaxError {
		p.i++ // "["
		if start := p.i; !p.is("]") {
			elems, err := p.callArgs()
			if err != nil {
				if err = p.backOut(start, err); err != nil {
					return err
				}
			} else {
				l.Elems = elems
			}
		}
		return p.expect("]")
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// call = Ident "(" (expr ("," expr)*)? ")"
func (p *descent) call() (*Call, *syntaxError) {
	c := &Call{Pos: p.pos(p.peek()), Func: p.val(p.peek())}
	defer func() { p.depth-- }()
	if err := p.nest(); err != nil {
		return nil, err
	}
	p.i += 2
	if start := p.i; !p.is(")") {
		args, err := p.callArgs()
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
		} else {
			c.Args = args
		}
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	return c, nil
}

// callArgs = expr ("," expr)*; an empty list when no expression starts.
func (p *descent) callArgs() ([]*Expr, *syntaxError) { return commaList(p, p.expr, p.needExpr) }
