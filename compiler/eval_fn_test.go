package compiler

import (
	"fmt"
	"strings"
	"testing"
)

// TestFnBounds: calls nested past the depth bound, and functions whose
// calls multiply, end in a positioned error rather than a crash of the
// Go stack or a compilation that never ends.
func TestFnBounds(t *testing.T) {
	const body = "for r in 0..ranks {\n  copy rank(r).input[0] -> rank(r).output[r]\n}\n"
	chain := func(n int, rhs string) string {
		var b strings.Builder
		b.WriteString("collective allgather chunks 1\nparam ranks = 2\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "fn f%d(x) = %s\n", i, strings.ReplaceAll(rhs, "NEXT", fmt.Sprintf("f%d", i+1)))
		}
		fmt.Fprintf(&b, "fn f%d(x) = x\nlet y = f0(1)\n%s", n, body)
		return b.String()
	}
	for _, c := range []struct {
		name, src string
		opts      Options
		want      string
	}{
		{"deep", chain(300, "NEXT(x)"), Options{}, "x.msccl:258:14: error: calls of f256 nest more than 256 deep"},
		{"doubling", chain(40, "NEXT(x) + NEXT(x)"), Options{MaxOps: 1000}, "error: the program makes more than 4000 function calls"},
		{"fits", chain(200, "NEXT(x)"), Options{}, ""},
		{"params", "collective allgather chunks 1\nparam ranks = 2\nfn f(" + strings.Repeat("a, ", 16) + "b) = 1\n" + body, Options{},
			"x.msccl:3:1: error: fn f has 17 parameters; the limit is 16"},
	} {
		_, _, ds := CompileSource("x.msccl", []byte(c.src), nil, c.opts)
		got := ds.String()
		if c.want == "" && ds.HasErrors() || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: got %.300s\nwant %q", c.name, got, c.want)
		}
	}
}
