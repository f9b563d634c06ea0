// Package fulltest decides how much of each test matrix a run covers.
// `go test ./...` keeps to a representative sample (every algorithm at
// one shape, one type per class, the short fuzz budgets) so that a
// newcomer's run ends in a few minutes on a small machine; with
// MSCCL_FULL=1 (CI sets it in .ci/run) every matrix runs in full.
// `go test -short` keeps to the sample whatever the variable says.
//
// It is a leaf for tests only: it imports nothing of this module.
package fulltest

import (
	"os"
	"testing"
)

// Env is the variable that asks for the full matrices.
const Env = "MSCCL_FULL"

// On reports whether this run covers every matrix in full: MSCCL_FULL is
// set to anything but "" or "0", and -short was not given.
func On() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0" && !testing.Short()
}

// Sample reports whether this run keeps to the representative sample
// (the default): the negation of On.
func Sample() bool { return !On() }

// Skip skips t unless the run is the full one; why says what the test
// costs, so the skip message tells a reader what they left out.
func Skip(t testing.TB, why string) {
	t.Helper()
	if !On() {
		t.Skipf("%s: runs with %s=1 (as CI does)", why, Env)
	}
}

// Stride keeps every k-th element of xs (from the first) in the sample
// run and all of them in the full one: for long lists of generated cases
// (the mutants of every plan) where any spread-out part catches a
// regression.
func Stride[T any](xs []T, k int) []T {
	if On() || k <= 1 {
		return xs
	}
	out := make([]T, 0, (len(xs)+k-1)/k)
	for i := 0; i < len(xs); i += k {
		out = append(out, xs[i])
	}
	return out
}
