package dsl

import "github.com/alecthomas/participle/v2/lexer"

// The parts the parser's rules are made of: repetitions, lists, optional
// parts and fixed runs, each backed out by the rules in descent.go (backOut)
// in one place rather than in every rule that has one.

// many = item*: items until one does not start (item returns nil) or
// fails within the lookahead (backed out: the repetition ends before it).
func many[T any](p *descent, item func() (*T, *syntaxError)) ([]*T, *syntaxError) {
	var list []*T
	for {
		start := p.i
		x, err := item()
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			return list, nil
		}
		if x == nil {
			return list, nil
		}
		list = append(list, x)
	}
}

// attempt parses an alternative: one that fails within the lookahead is
// backed out (nil, nil: the caller tries the next alternative).
func attempt[T any](p *descent, rule func() (*T, *syntaxError)) (*T, *syntaxError) {
	start := p.i
	x, err := rule()
	if err != nil {
		return nil, p.backOut(start, err)
	}
	return x, nil
}

// need parses an item that must be there: finding none is an error that
// names what was wanted.
func need[T any](p *descent, item func() (*T, *syntaxError), what string) (*T, *syntaxError) {
	x, err := item()
	if err == nil && x == nil {
		err = p.fail(what)
	}
	return x, err
}

// commaList = first ("," more)*; nil when first finds nothing here. A
// "," whose item fails within the lookahead is backed out with it and ends
// the list. more must find an item or fail (needExpr, needRef, arg).
func commaList[T any](p *descent, first, more func() (*T, *syntaxError)) ([]*T, *syntaxError) {
	x, err := first()
	if x == nil || err != nil {
		return nil, err
	}
	list := []*T{x}
	for {
		start := p.i
		if !p.accept(",") {
			return list, nil
		}
		x, err := more()
		if err != nil {
			if err = p.backOut(start, err); err != nil {
				return nil, err
			}
			return list, nil
		}
		list = append(list, x)
	}
}

// optExpr = (lit expr)?: nil when lit is not next, or when the expression
// after it fails within the lookahead (lit is backed out with it).
func (p *descent) optExpr(lit string) (*Expr, *syntaxError) {
	start := p.i
	if !p.accept(lit) {
		return nil, nil
	}
	e, err := p.needExpr()
	if err != nil {
		return nil, p.backOut(start, err)
	}
	return e, nil
}

// A rule that is a fixed run of parts is written as its grammar line, a
// call of seq or node, so that each kind of part is parsed (and backed out)
// in one place. The parts, by what they fill in:
//
//	"lit"               the literal must be next
//	**Expr              an expression must be there (needExpr)
//	ident{...}          a name must be there (what names it in the error)
//	opt{...}            (lit expr)?, optExpr
//	*[]*Stmt            a body "{" stmt* "}"
//	*[]*CollectiveAttr  attr*
//	*[]*Expr            expr ("," expr)*
//	*[]*Arg             arg ("," arg)*
type (
	ident struct {
		dst  *string
		what string
	}
	opt struct {
		lit string
		dst **Expr
	}
)

// seq parses parts in order and stops at the first that fails.
func (p *descent) seq(parts ...any) *syntaxError {
	for _, part := range parts {
		var err *syntaxError
		switch x := part.(type) {
		case string:
			err = p.expect(x)
		case **Expr:
			*x, err = p.needExpr()
		case ident:
			*x.dst, err = p.kind(tIdent, x.what)
		case opt:
			*x.dst, err = p.optExpr(x.lit)
		case *[]*Stmt:
			*x, err = p.body()
		case *[]*CollectiveAttr:
			*x, err = many(p, p.collectiveAttr)
		case *[]*Expr:
			*x, err = p.exprList()
		case *[]*Arg:
			*x, err = commaList(p, p.arg, p.arg)
		default:
			panic("dsl: a rule part of no known type")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// node parses the rule of n, a fixed run of parts (seq), and sets its Pos
// and EndPos (pos, end); nil and the error when a part fails.
func node[T any](p *descent, n *T, pos, end *lexer.Position, parts ...any) (*T, *syntaxError) {
	*pos = p.pos(p.peek())
	if err := p.seq(parts...); err != nil {
		return nil, err
	}
	*end = p.last()
	return n, nil
}
