package compiler

import (
	"math"
	"math/big"
	"math/rand"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/dsl"
)

// TestIntegerOpsAgainstBig checks the overflow-checked operators against
// math/big on edge values and random ones: a result is returned exactly
// when the true result fits in 64 bits, and then it is the true result.
func TestIntegerOpsAgainstBig(t *testing.T) {
	edge := []int64{0, 1, -1, 2, -2, 3, 62, 63, 64, 1 << 31, -(1 << 31), 1 << 32, 3037000499, 3037000500, -3037000500,
		math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 62, -(1 << 62)}
	rng := rand.New(rand.NewSource(1))
	vals := append([]int64(nil), edge...)
	for i := 0; i < 40; i++ {
		vals = append(vals, rng.Int63()>>uint(rng.Intn(63)), -(rng.Int63() >> uint(rng.Intn(63))))
	}
	fits := func(z *big.Int) bool { return z.IsInt64() }
	for _, a := range vals {
		for _, b := range vals {
			A, B := big.NewInt(a), big.NewInt(b)
			if got, ok := addInt(a, b); ok != fits(new(big.Int).Add(A, B)) || (ok && got != a+b) {
				t.Errorf("addInt(%d, %d) = %d, %v", a, b, got, ok)
			}
			want := new(big.Int).Mul(A, B)
			if got, ok := mulInt(a, b); ok != fits(want) || (ok && got != want.Int64()) {
				t.Errorf("mulInt(%d, %d) = %d, %v; want %s", a, b, got, ok, want)
			}
			if b >= 0 && b <= 200 {
				want := new(big.Int).Exp(A, B, nil)
				if got, ok := powInt(a, b); ok != fits(want) || (ok && got != want.Int64()) {
					t.Errorf("powInt(%d, %d) = %d, %v; want %s", a, b, got, ok, want)
				}
			}
		}
	}
}

// TestEvalOperators runs the evaluator on expressions, checking values,
// precedence, short-circuiting and which expressions are errors.
func TestEvalOperators(t *testing.T) {
	for _, c := range []struct {
		expr string
		want int64
		err  string // a substring of the error; "" when the value is wanted
	}{
		{"5 ^ 3", 6, ""},
		{"1 << 10", 1024, ""},
		{"-7 >> 1", -4, ""},
		{"2 ** 3 ** 2", 512, ""},
		{"2 * 3 ** 2", 18, ""},
		{"(2 * 3) ** 2", 36, ""},
		{"1 + 2 << 3", 17, ""},
		{"6 ^ 3 + 1", 6, ""},
		{"1 << 3 * 2", 16, ""},
		{"(-2) ** 63", math.MinInt64, ""},
		{"1 < 2 == 1", 1, ""},
		{"0 && 1 / 0", 0, ""},
		{"1 || 1 / 0", 1, ""},
		{"0 || 0 && 1 / 0", 0, ""},
		{"1 && 2 || 1 / 0", 1, ""},
		{"3 && 4", 1, ""},
		{"0 || 7", 1, ""},
		{"1 && 1 / 0", 0, "division by zero"},
		{"0 - (1 << 62) - (1 << 62)", math.MinInt64, ""},
		{"0 - (1 << 62) - (1 << 62) - 1", 0, "integer overflow"},
		{"(0 - (1 << 62) - (1 << 62)) % -1", 0, ""},
		{"(0 - (1 << 62) - (1 << 62)) / -1", 0, "integer overflow"},
		{"1 << 63", 0, "shift count 63"},
		{"1 >> -1", 0, "shift count -1"},
		{"3 << 62", 0, "integer overflow"},
		{"2 ** -1", 0, "negative exponent"},
		{"-2 ** 2", 0, "ambiguous"},
		{"!0 ** 2", 0, "ambiguous"},
		{"abs(0 - (1 << 62) - (1 << 62))", 0, "integer overflow"},
		{"6 & 3", 2, ""},
		{"4 | 1", 5, ""},
		{"~0", -1, ""},
		{"~5 & 7", 2, ""},
		{"5 & 1 == 1", 1, ""},    // Go: (5 & 1) == 1; in C, 5 & (1 == 1)
		{"1 | 2 == 3", 1, ""},    // Go: (1 | 2) == 3
		{"1 + 2 & 3", 3, ""},     // & binds like *
		{"8 | 1 << 1", 10, ""},   // | binds like +
		{"2 | 4 ^ 1 + 1", 8, ""}, // one level, left to right: ((2 | 4) ^ 1) + 1
		{"~2 ** 2", 0, "ambiguous"},
		{"if 1 then 2 else 3", 2, ""},
		{"if 0 then 2 else 3 + 4", 7, ""},
		{"(if 0 then 2 else 3) + 4", 7, ""},
		{"if 0 then 1 / 0 else 5", 5, ""},
		{"if 1 then 5 else 1 / 0", 5, ""},
		{"if 0 then 1 else if 0 then 2 else 3", 3, ""},
		{"if 1 / 0 then 1 else 2", 0, "division by zero"},
		{"[4, 5, 6][2]", 6, ""},
		{"[4, 5, 6][3]", 0, "index 3 out of range"},
		{"[4, 5, 6][-1]", 0, "index -1 out of range"},
		{"len([4, 5, 6])", 3, ""},
		{"len([])", 0, ""},
		{"[1, 2]", 0, "a list is not an integer"},
		{"(3)[0]", 0, "(3) is an integer, not a list"},
		{"9223372036854775807", math.MaxInt64, ""},
		{"0x7fffffffffffffff", math.MaxInt64, ""},
		{"8589934591G", 8589934591 << 30, ""},
		{"9223372036854775808", 0, "integer 9223372036854775808 out of range"},
		{"8589934592G", 0, "out of range"},
		{"010", 10, ""},
	} {
		src := "collective allreduce\nparam ranks = 1\nlet x = " + c.expr + "\n"
		f, ds := dsl.Parse("x.msccl", []byte(src))
		if ds.HasErrors() {
			t.Errorf("%s: %s", c.expr, ds)
			continue
		}
		st := &state{file: f}
		ev := &evaluator{st: st, params: map[string]int64{}, names: map[string]bool{}, maxOps: 100, maxIt: 100}
		got, ok := ev.eval(f.Stmts[2].Let.Value)
		switch {
		case c.err == "" && (!ok || got != c.want):
			t.Errorf("%s = %d, %v (%s); want %d", c.expr, got, ok, st.diags, c.want)
		case c.err != "" && (ok || len(st.diags) == 0 || !strings.Contains(st.diags[0].Summary, c.err)):
			t.Errorf("%s = %d, %v (%s); want an error with %q", c.expr, got, ok, st.diags, c.err)
		case c.err != "" && !st.diags[0].Subject.Start.IsValid():
			t.Errorf("%s: error without a position", c.expr)
		}
	}
}
