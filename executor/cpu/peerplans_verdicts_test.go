package cpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
)

// TestPeerPlansReadmeVerdicts keeps the verdict columns of
// testdata/peer-plans/README.md true (ir's TestPeerPlansReadme checks the
// rule columns): every fixture is run at every size the row lists under
// "sizes simulated" and every launch count under "launches", symbolically
// and at byte level in f32, and must end as the row's verdict says
// (correct, or a race). In the default run (not MSCCL_FULL=1) the 1 MiB sizes are left out and only
// the fewest and the most launches run.
func TestPeerPlansReadmeVerdicts(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	plans := fixtures(t)
	rows := 0
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 8 {
			t.Errorf("README row %q: want 8 cells", l)
			continue
		}
		name := strings.Trim(cells[0], "`")
		p := plans[name]
		if p == nil {
			t.Errorf("README row for %s, which is not a fixture", name)
			continue
		}
		rows++
		sizes, err := readmeSizes(cells[5])
		if err != nil {
			t.Errorf("%s: sizes %q: %v", name, cells[5], err)
			continue
		}
		launches, err := readmeLaunches(cells[6])
		if err != nil {
			t.Errorf("%s: launches %q: %v", name, cells[6], err)
			continue
		}
		want := Correct
		switch {
		case strings.HasPrefix(cells[7], "correct"):
		case strings.HasPrefix(cells[7], "**race**"):
			want = Race
		default:
			t.Errorf("%s: verdict %q: want it to start with correct or **race**", name, cells[7])
			continue
		}
		if fulltest.Sample() {
			launches = []int{launches[0], launches[len(launches)-1]}
		}
		for _, size := range sizes {
			if fulltest.Sample() && size >= 1<<20 {
				continue
			}
			for _, l := range launches {
				for _, sym := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s/%d/%d/sym=%v", name, size, l, sym), func(t *testing.T) {
						rep, err := Run(p, Options{Size: size, Launches: l, Symbolic: sym, DType: F32})
						if err != nil {
							t.Fatal(err)
						}
						if rep.Verdict != want {
							t.Fatalf("README says %s, the run %s:\n%s", want, rep.Verdict, rep)
						}
					})
				}
			}
		}
	}
	if rows != len(plans) {
		t.Errorf("README has rows for %d fixtures, there are %d", rows, len(plans))
	}
}

// readmeSizes reads "64, 128, 2432, 1 MiB".
func readmeSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mul := int64(1)
		if v, ok := strings.CutSuffix(f, " MiB"); ok {
			f, mul = v, 1<<20
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// readmeLaunches reads "1–5" (a range) or "1, 5" (a list).
func readmeLaunches(s string) ([]int, error) {
	if lo, hi, ok := strings.Cut(s, "–"); ok {
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a < 1 || b < a {
			return nil, fmt.Errorf("not a range of launch counts")
		}
		var out []int
		for l := a; l <= b; l++ {
			out = append(out, l)
		}
		return out, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("not a launch count: %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
