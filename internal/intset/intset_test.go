package intset

import "testing"

func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b []int
		want bool
	}{
		{nil, nil, true}, {[]int{1, 2}, []int{2, 1}, true}, {[]int{1, 2}, []int{1, 3}, false},
		{[]int{1}, []int{1, 1}, false}, {[]int{}, nil, true},
	} {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
