package fulltest

import "testing"

// The variable's values: unset and "0" keep to the sample; anything else
// asks for the full matrices (unless -short, which this test does not
// pass through: go test -short would make every row a sample).
func TestOn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short makes every run a sample")
	}
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		t.Setenv(Env, v)
		if On() != want || Sample() == want {
			t.Errorf("%s=%q: On() = %v, want %v", Env, v, On(), want)
		}
	}
}

func TestSkip(t *testing.T) {
	t.Setenv(Env, "")
	skipped := true
	t.Run("sample", func(t *testing.T) {
		Skip(t, "costly")
		skipped = false
	})
	if !skipped {
		t.Error("Skip did not skip in the sample run")
	}
	t.Setenv(Env, "1")
	ran := false
	t.Run("full", func(t *testing.T) {
		Skip(t, "costly")
		ran = true
	})
	if !ran && !testing.Short() {
		t.Error("Skip skipped in the full run")
	}
}

func TestStride(t *testing.T) {
	xs := []int{0, 1, 2, 3, 4, 5, 6}
	t.Setenv(Env, "")
	if got := Stride(xs, 3); len(got) != 3 || got[0] != 0 || got[1] != 3 || got[2] != 6 {
		t.Errorf("sample Stride(xs, 3) = %v, want [0 3 6]", got)
	}
	if got := Stride(xs, 1); len(got) != len(xs) {
		t.Errorf("Stride(xs, 1) = %v, want all", got)
	}
	t.Setenv(Env, "1")
	if got := Stride(xs, 3); len(got) != len(xs) && !testing.Short() {
		t.Errorf("full Stride(xs, 3) = %v, want all", got)
	}
}
