package intset

import "slices"

// Same reports whether a and b hold the same elements, in any order. The
// lists are short (the channels of one op, the ranks of a switch group),
// so the quadratic scan beats sorting copies; a list with repeats equals
// one of the same length whose elements it covers.
func Same(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
