package dsl

// The expression, buffer-reference and clause rules of the parser
// (descent.go has the statements and the rules every rule follows).

// exprList = expr ("," expr)*, the comma-separated part backed out as a
// repetition.
func (p *descent) exprList() ([]*Expr, *syntaxError) {
	e, err := p.needExpr()
	if err != nil {
		return nil, err
	}
	list := []*Expr{e}
	for {
		start := p.i
		if !p.accept(",") {
			return list, nil
		}
		e, err := p.needExpr()
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			return list, nil
		}
		list = append(list, e)
	}
}

// refList = ref ("," ref)*; nil when no ref starts here.
func (p *descent) refList() ([]*Ref, *syntaxError) {
	r, err := p.ref()
	if r == nil || err != nil {
		return nil, err
	}
	list := []*Ref{r}
	for {
		start := p.i
		if !p.accept(",") {
			return list, nil
		}
		r, err := p.ref()
		if err == nil && r == nil {
			err = p.fail("a buffer reference rank(...).BUFFER[...]")
		}
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			return list, nil
		}
		list = append(list, r)
	}
}

// ref = "rank" "(" expr ")" "." Ident "[" expr (":" expr)? "]"
func (p *descent) ref() (*Ref, *syntaxError) {
	if !p.is("rank") {
		return nil, nil
	}
	r := &Ref{Pos: p.pos(p.peek())}
	p.i++
	var err *syntaxError
	if err = p.expect("("); err != nil {
		return nil, err
	}
	if r.Rank, err = p.needExpr(); err != nil {
		return nil, err
	}
	if err = p.expect(")"); err != nil {
		return nil, err
	}
	if err = p.expect("."); err != nil {
		return nil, err
	}
	if r.Buffer, err = p.kind(tIdent, "a buffer name"); err != nil {
		return nil, err
	}
	if err = p.expect("["); err != nil {
		return nil, err
	}
	if r.Lo, err = p.needExpr(); err != nil {
		return nil, err
	}
	if start := p.i; p.accept(":") {
		if r.Hi, err = p.needExpr(); err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
		}
	}
	if err = p.expect("]"); err != nil {
		return nil, err
	}
	r.EndPos = p.last()
	return r, nil
}

var clauseKeys = map[string]bool{"tb": true, "via": true, "to": true, "op": true, "sem": true, "tbg": true, "id": true, "count": true}

// clause = ("tb" | "via" | "to" | "op" | "sem" | "tbg" | "id" | "count") arg ("," arg)*
func (p *descent) clause() (*Clause, *syntaxError) {
	t := p.peek()
	if t.kind == tEOF || !clauseKeys[p.val(t)] {
		return nil, nil
	}
	c := &Clause{Pos: p.pos(t), Key: p.val(t)}
	p.i++
	a, err := p.arg()
	if err != nil {
		return nil, err
	}
	c.Args = []*Arg{a}
	for {
		start := p.i
		if !p.accept(",") {
			break
		}
		a, err := p.arg()
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			break
		}
		c.Args = append(c.Args, a)
	}
	c.EndPos = p.last()
	return c, nil
}

// arg = expr ("@" expr)?
func (p *descent) arg() (*Arg, *syntaxError) {
	a := &Arg{Pos: p.pos(p.peek())}
	var err *syntaxError
	if a.Value, err = p.needExpr(); err != nil {
		return nil, err
	}
	if start := p.i; p.accept("@") {
		if a.At, err = p.needExpr(); err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// binOps are the infix operators of an Expr chain.
var binOps = map[string]bool{"||": true, "&&": true, "==": true, "!=": true, "<=": true, ">=": true, "<<": true, ">>": true,
	"<": true, ">": true, "+": true, "-": true, "^": true, "**": true, "*": true, "/": true, "%": true}

// needExpr parses an expression that must be there.
func (p *descent) needExpr() (*Expr, *syntaxError) {
	e, err := p.expr()
	if err == nil && e == nil {
		err = p.fail("an expression")
	}
	return e, err
}

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
		u, err := p.unary()
		if err == nil && u == nil {
			err = p.fail("an operand")
		}
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

// unary = ("-" | "!")? primary
func (p *descent) unary() (*Unary, *syntaxError) {
	u := &Unary{Pos: p.pos(p.peek())}
	if p.is("-") || p.is("!") {
		u.Op = p.val(p.peek())
		p.i++
		prim, err := p.primary()
		if err == nil && prim == nil {
			err = p.fail("an operand")
		}
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

// primary = Int | String | call | Ident | "(" expr ")"
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
		if p.toks[p.i+1].kind == tOp && p.val(&p.toks[p.i+1]) == "(" {
			start := p.i
			c, err := p.call()
			if err == nil {
				pr.Call = c
				break
			}
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
		}
		p.i++
		v := p.val(t)
		pr.Ident = &v
	default:
		if !p.is("(") {
			return nil, nil
		}
		defer func() { p.depth-- }()
		if err := p.nest(); err != nil {
			return nil, err
		}
		p.i++
		e, err := p.needExpr()
		if err == nil {
			err = p.expect(")")
		}
		if err != nil {
			return nil, err
		}
		pr.Paren = e
	}
	pr.EndPos = p.last()
	return pr, nil
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
func (p *descent) callArgs() ([]*Expr, *syntaxError) {
	e, err := p.expr()
	if e == nil || err != nil {
		return nil, err
	}
	args := []*Expr{e}
	for {
		start := p.i
		if !p.accept(",") {
			return args, nil
		}
		e, err := p.needExpr()
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			return args, nil
		}
		args = append(args, e)
	}
}
