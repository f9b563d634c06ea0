package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotScriptReadsOutput feeds scripts/plot-bench.py what this
// program prints (table rows, reference lines, --tune's summary, --json
// rows, under perf.sh's step headers), so a change of the output format
// that the plots would silently lose fails here.
func TestPlotScriptReadsOutput(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	var b bytes.Buffer
	c := &config{}
	b.WriteString("== twoshot_i1_t1024: msccl-bench --algo allreduce_twoshot\n")
	tableHeader(&b)
	for _, r := range []Row{
		{Bytes: 64 << 20, Count: 32 << 20, Type: "f16", Redop: "sum", TimeUs: 4000, AlgBW: 16.7, BusBW: 29.3, Wrong: 0,
			Ref: &RefRow{Name: "allreduce_twoshot", TimeUs: 560, AlgBW: 119.8, BusBW: 209.7, Wrong: 0, Ratio: 7.1}},
		{Bytes: 256 << 20, Count: 128 << 20, Type: "f16", Redop: "sum", TimeUs: 16000, AlgBW: 16.7, BusBW: 29.3, Wrong: -1,
			Ref: &RefRow{Name: "allreduce_twoshot", TimeUs: 2200, AlgBW: 122, BusBW: 213.5, Wrong: -1, Ratio: 7.3}},
	} {
		if err := printRow(&b, c, r); err != nil {
			t.Fatal(err)
		}
		printRef(&b, &r)
	}
	b.WriteString("== tune: msccl-bench --tune\n")
	ll := candidate{"allreduce_allpairs_packet", 1, 1024}
	ap := candidate{"allreduce_allpairs", 16, 1024}
	all := []tuneResult{{ll, 1024, 20, 0.09}, {ap, 1024, 30, 0.06}, {ll, 64 << 20, 7000, 16}, {ap, 64 << 20, 600, 196}}
	printWinners(&b, winners(all), all, map[int64]candidate{1024: ll, 64 << 20: ll})
	if err := printRow(&b, &config{asJSON: true}, Row{Plan: "allreduce_ring", Bytes: 4096, TimeUs: 400, BusBW: 0.02}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "perf.log"), filepath.Join(dir, "plot.svg")
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "../../scripts/plot-bench.py", "-o", out, "--title", "t", in)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, want := range []string{">twoshot_i1_t1024<", ">reference allreduce_twoshot @ twoshot_i1_t", ">tuned (fastest per size)<", ">built-in table<", ">allreduce_ring<",
		"twoshot_i1_t1024: 256M, 16000.00 us, 29.30 GB/s", "tuned (fastest per size): 64M, 600.00 us, 196.00 GB/s (allreduce_allpairs instances=16 threads=1024)"} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(s, "<polyline"); n != 5 {
		t.Errorf("%d series drawn, want 5", n)
	}
	// Nothing to plot is an error, not an empty chart.
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, []byte("# nothing\n"), 0o644)
	if msg, err := exec.Command(py, "../../scripts/plot-bench.py", "-o", out, empty).CombinedOutput(); err == nil || !strings.Contains(string(msg), "no msccl-bench rows") {
		t.Errorf("empty input: %v %s", err, msg)
	}
}
