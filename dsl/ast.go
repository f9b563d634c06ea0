package dsl

import "github.com/alecthomas/participle/v2/lexer"

// The `parser` struct tags below are the grammar. dsl/descent.go
// implements them by hand (participle's reflection cost every compile
// process milliseconds); dsl/oracle_test.go runs participle on the tags
// and holds the two to the same trees, so a grammar change is an edit to
// both.

// File is a parsed program. Statements appear in source order; the header
// statements (collective, param, option) may be interleaved with the body
// but are conventionally first.
type File struct {
	Filename string
	Stmts    []*Stmt `parser:"@@*"`
	// Comments are kept out of the grammar and re-attached by Format.
	Comments []Comment
}

// Comment is one `//` comment with its position.
type Comment struct {
	Pos  Pos
	Text string
}

// Stmt is one statement; exactly one field is set.
type Stmt struct {
	Pos    lexer.Position
	EndPos lexer.Position

	Collective *CollectiveStmt `parser:"(  @@"`
	Param      *ParamStmt      `parser:" | @@"`
	Option     *OptionStmt     `parser:" | @@"`
	Let        *LetStmt        `parser:" | @@"`
	For        *ForStmt        `parser:" | @@"`
	If         *IfStmt         `parser:" | @@"`
	On         *OnStmt         `parser:" | @@"`
	Pipeline   *PipelineStmt   `parser:" | @@"`
	Require    *RequireStmt    `parser:" | @@"`
	Fn         *FnStmt         `parser:" | @@"`
	Op         *OpStmt         `parser:" | @@ ) \";\"?"`
}

// CollectiveStmt is the header: `collective allreduce chunks 8 inplace`.
type CollectiveStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Kind   string            `parser:"\"collective\" @Ident"`
	Attrs  []*CollectiveAttr `parser:"@@*"`
}

// CollectiveAttr is `inplace`, `chunks EXPR`, `root EXPR` (broadcast,
// reduce, gather, scatter) or `peers MAP` (sendrecv).
type CollectiveAttr struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Inplace bool     `parser:"(  @\"inplace\""`
	Chunks  *Expr    `parser:" | \"chunks\" @@"`
	Root    *Expr    `parser:" | \"root\" @@"`
	Peers   *PeerMap `parser:" | \"peers\" @@ )"`
}

// PeerMap says where each rank sends in a sendrecv: `r -> EXPR`, EXPR
// evaluated with r bound to each rank in turn, or a list `[EXPR, ...]`
// with one entry per rank. Either must be a permutation of the ranks.
type PeerMap struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Var    string  `parser:"(  @Ident \"->\""`
	Expr   *Expr   `parser:"   @@"`
	List   []*Expr `parser:" | \"[\" @@ ( \",\" @@ )* \"]\" )"`
}

// ParamStmt declares an integer parameter the CLI may override with -D.
type ParamStmt struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Name    string `parser:"\"param\" @Ident \"=\""`
	Default *Expr  `parser:"@@"`
}

// OptionStmt sets a plan option: `option protocol = LL`.
type OptionStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   string `parser:"\"option\" @Ident \"=\""`
	Value  *Expr  `parser:"@@"`
}

// LetStmt binds a name to an integer for the rest of its block.
type LetStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   string `parser:"\"let\" @Ident \"=\""`
	Value  *Expr  `parser:"@@"`
}

// ForStmt loops over the half-open range [From, To) by Step (default 1).
type ForStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Var    string  `parser:"\"for\" @Ident \"in\""`
	From   *Expr   `parser:"@@ \"..\""`
	To     *Expr   `parser:"@@"`
	Step   *Expr   `parser:"( \"step\" @@ )?"`
	Body   []*Stmt `parser:"\"{\" @@* \"}\""`
}

// IfStmt runs Then when Cond is non-zero, else Else or ElseIf.
type IfStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Cond   *Expr   `parser:"\"if\" @@"`
	Then   []*Stmt `parser:"\"{\" @@* \"}\""`
	ElseIf *IfStmt `parser:"( \"else\" ( @@"`
	Else   []*Stmt `parser:"| \"{\" @@* \"}\" ) )?"`
}

// RequireStmt states a condition the parameters must meet:
// `require ranks % 2 == 0, "the ring pairs ranks"`. It is checked when the
// parameters are bound, so an unsupported world size is reported at the
// requirement rather than as whatever breaks first further down.
type RequireStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Cond   *Expr   `parser:"\"require\" @@"`
	Msg    *string `parser:"( \",\" @String )?"`
}

// FnStmt declares a function of integers: `fn peer(r, k) = r ^ (1 << k)`.
// Its body is one expression over its parameters, the params and the
// top-level lets; calls to it evaluate the body with the arguments bound.
type FnStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   string   `parser:"\"fn\" @Ident \"(\""`
	Params []string `parser:"( @Ident ( \",\" @Ident )* )? \")\" \"=\""`
	Body   *Expr    `parser:"@@"`
}

// OnStmt opens a channel-level block: the ops inside run on one rank's
// thread block exactly as written.
type OnStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Rank   *Expr   `parser:"\"on\" \"rank\" \"(\" @@ \")\""`
	TB     *Expr   `parser:"\"tb\" @@"`
	Body   []*Stmt `parser:"\"{\" @@* \"}\""`
}

// PipelineStmt loops its body over windows of Unit bytes (channel level).
type PipelineStmt struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Unit   *Expr   `parser:"\"pipeline\" \"unit\" @@"`
	Chunks *Expr   `parser:"\"chunks\" @@"`
	Body   []*Stmt `parser:"\"{\" @@* \"}\""`
}

// OpStmt is every operation, chunk level (copy, reduce) or channel level
// (put, signal, wait, ...): NAME [SRC, ...] [-> DST, ...] [clauses].
type OpStmt struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Name    string    `parser:"@Ident"`
	Src     []*Ref    `parser:"( @@ ( \",\" @@ )* )?"`
	Arrow   bool      `parser:"( @\"->\""`
	Dst     []*Ref    `parser:"  @@ ( \",\" @@ )* )?"`
	Clauses []*Clause `parser:"@@*"`
}

// Ref is a chunk slice: rank(r).input[c] or rank(r).scratch[lo:hi].
type Ref struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Rank   *Expr  `parser:"\"rank\" \"(\" @@ \")\" \".\""`
	Buffer string `parser:"@Ident"`
	Lo     *Expr  `parser:"\"[\" @@"`
	Hi     *Expr  `parser:"( \":\" @@ )? \"]\""`
}

// Clause modifies an op: tb N, via memory|port|get, to PEER[@TB], ...
type Clause struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Key    string `parser:"@( \"tb\" | \"via\" | \"to\" | \"op\" | \"sem\" | \"tbg\" | \"id\" | \"count\" )"`
	Args   []*Arg `parser:"@@ ( \",\" @@ )*"`
}

// Arg is a clause argument; At is the peer thread block of `to p@b`.
type Arg struct {
	Pos   lexer.Position
	Value *Expr `parser:"@@"`
	At    *Expr `parser:"( \"@\" @@ )?"`
}

// Expr is a flat chain of binary operations; the compiler's evaluator
// applies precedence (docs/dsl.md) and short-circuits && and ||.
type Expr struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Head   *Unary     `parser:"@@"`
	Tail   []*BinTail `parser:"@@*"`
}

// BinTail is one `op operand` of an Expr chain.
type BinTail struct {
	Op      string `parser:"@( \"||\" | \"&&\" | \"==\" | \"!=\" | \"<=\" | \">=\" | \"<<\" | \">>\" | \"<\" | \">\" | \"+\" | \"-\" | \"^\" | \"&\" | \"|\" | \"**\" | \"*\" | \"/\" | \"%\" )"`
	Operand *Unary `parser:"@@"`
}

// Unary is a primary with an optional prefix: `-` negates, `!` is logical
// not, `~` bitwise complement.
type Unary struct {
	Pos  lexer.Position
	Op   string   `parser:"@( \"-\" | \"!\" | \"~\" )?"`
	Prim *Primary `parser:"@@"`
}

// Primary is a literal, conditional, name, call, list or parenthesised
// expression, optionally indexed: `ring[i]`.
type Primary struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Int    *string  `parser:"(  @Int"`
	Str    *string  `parser:" | @String"`
	Cond   *Cond    `parser:" | @@"`
	Call   *Call    `parser:" | @@"`
	Ident  *string  `parser:" | @Ident"`
	List   *ListLit `parser:" | @@"`
	Paren  *Expr    `parser:" | \"(\" @@ \")\" )"`
	Index  *Expr    `parser:"( \"[\" @@ \"]\" )?"`
}

// Cond is the conditional expression `if C then A else B`. Else extends
// as far right as an expression goes, so a conditional inside a larger
// expression is written in parentheses.
type Cond struct {
	Pos  lexer.Position
	If   *Expr `parser:"\"if\" @@"`
	Then *Expr `parser:"\"then\" @@"`
	Else *Expr `parser:"\"else\" @@"`
}

// ListLit is a list of integers: `[0, 2, 4, 6, 7, 5, 3, 1]`.
type ListLit struct {
	Pos   lexer.Position
	Elems []*Expr `parser:"\"[\" ( @@ ( \",\" @@ )* )? \"]\""`
}

// Call is a function call: a builtin (min, max, abs, log2, len) or a
// function declared with fn.
type Call struct {
	Pos  lexer.Position
	Func string  `parser:"@Ident \"(\""`
	Args []*Expr `parser:"( @@ ( \",\" @@ )* )? \")\""`
}

// posOf converts a lexer position.
func posOf(p lexer.Position) Pos {
	return Pos{Filename: p.Filename, Offset: p.Offset, Line: p.Line, Col: p.Column}
}

// RangeOf makes a Range from a node's Pos and EndPos.
func RangeOf(start, end lexer.Position) Range {
	return Range{Start: posOf(start), End: posOf(end)}
}
