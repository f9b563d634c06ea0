package cpu

import (
	"testing"
	"time"
)

func TestSyntheticCorrect(t *testing.T) {
	p := synthAllReduce(8, 16, 10)
	if n := countOps(p); n < 3000 {
		t.Fatalf("synthetic plan has %d ops, want a few thousand", n)
	}
	for _, dt := range []DType{F32, BF16, I32} {
		start := time.Now()
		rep, err := Run(p, Options{Size: 1 << 20, DType: dt})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("%s:\n%s", dt, rep)
		}
		t.Logf("%s: %d ops, 1 MiB, %d launches in %v", dt, countOps(p), len(rep.Outputs), time.Since(start))
	}
}

func benchRun(b *testing.B, name string, run func() *Report, size int64) {
	b.Helper()
	b.ReportAllocs()
	var rep *Report
	for b.Loop() {
		rep = run()
	}
	if !rep.OK() && knownRacy[name] == "" {
		b.Fatalf("not correct:\n%s", rep)
	}
	launches := int64(len(rep.Outputs))
	b.ReportMetric(float64(size*launches*int64(b.N))/b.Elapsed().Seconds(), "bytes/s")
}

// BenchmarkSimulate runs every fixture, and the synthetic 8-rank plan of a
// few thousand ops, at 1 MiB with two launches (the default).
func BenchmarkSimulate(b *testing.B) {
	plans := fixtures(b)
	for _, name := range sortedNames(plans) {
		p := plans[name]
		b.Run(name, func(b *testing.B) {
			benchRun(b, name, func() *Report {
				rep, err := Run(p, Options{Size: 1 << 20, DType: F16})
				if err != nil {
					b.Fatal(err)
				}
				return rep
			}, 1<<20)
		})
	}
	p := synthAllReduce(8, 16, 10)
	b.Run("synth_8rank_3584ops", func(b *testing.B) {
		benchRun(b, "", func() *Report {
			rep, err := Run(p, Options{Size: 1 << 20, DType: F16})
			if err != nil {
				b.Fatal(err)
			}
			return rep
		}, 1<<20)
	})
}
