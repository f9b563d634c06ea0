package cpu

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoRaces: Options.NoRaces drops the race analysis and nothing else.
// Every broken fixture keeps its verdict except the races, which report
// none (and show what the race hid: a wrong result, a leftover signal);
// every plan of the differential set computes bit for bit the same
// outputs with and without it (the schedule does not depend on clocks).
func TestNoRaces(t *testing.T) {
	for _, c := range brokenCases {
		t.Run("broken/"+strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			p := loadPlan(t, filepath.Join(brokenDir, c.file))
			rep, err := Run(p, Options{Size: sizes(p)[0] * 4, DType: I32, Seed: 1, Launches: c.launches, NoRaces: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Races) != 0 || rep.Verdict == Race {
				t.Fatalf("verdict %s with %d races reported under NoRaces", rep.Verdict, len(rep.Races))
			}
			// A race hides the verdicts after it; any other verdict stays.
			if c.want != Race && rep.Verdict != c.want {
				t.Fatalf("verdict %s, want %s:\n%s", rep.Verdict, c.want, rep)
			}
		})
	}
	plans := symPlans(t)
	for _, name := range sortedNames(plans) {
		p := plans[name]
		t.Run(name, func(t *testing.T) {
			size := sizes(p)[0] * 3
			full, err := Run(p, Options{Size: size, DType: BF16, Launches: 3, Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			fast, err := Run(p, Options{Size: size, DType: BF16, Launches: 3, Seed: 2, NoRaces: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(fast.Races) != 0 {
				t.Fatalf("NoRaces reported %d races", len(fast.Races))
			}
			if full.Verdict != Race && fast.Verdict != full.Verdict {
				t.Fatalf("verdict %s with NoRaces, %s without", fast.Verdict, full.Verdict)
			}
			for l := range full.Outputs {
				for r := range full.Outputs[l] {
					if !bytes.Equal(full.Outputs[l][r], fast.Outputs[l][r]) {
						t.Fatalf("launch %d rank %d: outputs differ with NoRaces", l, r)
					}
				}
			}
		})
	}
}
