package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// modelGPU puts a model of one H200 in place of the device for the tuner:
// the plans are compiled, filtered and admitted as on the GPU, and each
// is "timed" by a formula (a launch cost plus bytes over a bandwidth that
// grows with the blocks reducing), or refused where its blocks could not
// all be resident (registers allowing one 1024-thread block per
// multiprocessor). delay is spent per candidate, as device time.
func modelGPU(t *testing.T, delay time.Duration) *bytes.Buffer {
	t.Helper()
	saved := tuneGPU
	t.Cleanup(func() { tuneGPU = saved })
	var log bytes.Buffer
	tuneGPU.log = &log
	tuneGPU.open = func() (string, residency, error) {
		return "model H200", residency{sms: 132, threadsPerSM: 2048, blocksPerSM: 32}, nil
	}
	tuneGPU.time = func(c *config, p *ir.Plan, label string, sizes []int64) ([]Row, error) {
		time.Sleep(delay)
		blocks := int64(len(p.GPUs) * len(p.GPUs[0].ThreadBlocks))
		threads := int64(p.NumThreadsPerBlock)
		var rows []Row
		for _, s := range sizes {
			r := Row{Plan: label, Bytes: s}
			if blocks*threads > 132*1024 {
				r.Skipped = "cudaexec: plan needs all its thread blocks resident at once"
				rows = append(rows, r)
				continue
			}
			launch, gbps := 40.0, math.Min(300, 2*float64(blocks)*float64(threads)/1024)
			if strings.Contains(label, "packet") {
				launch, gbps = 20, math.Min(20, gbps)
			}
			r.TimeUs = launch + float64(s)/gbps/1e3
			r.BusBW = float64(s) / r.TimeUs / 1e3 * 1.75
			rows = append(rows, r)
		}
		return rows, nil
	}
	return &log
}

// tuneArgs are the flags scripts/gpu/perf.sh's tune part passes.
func tuneArgs(dir, budget string) []string {
	return []string{"--tune", "--collective", "allreduce", "--ranks", "8", "-b", "1K", "-e", "256M", "-f", "4", "-d", "f16", "-G", "-n", "10", "-w", "3",
		"--tune-algos", "allreduce_allpairs_packet,allreduce_allpairs,allreduce_twoshot", "--tune-instances", "1,2,4,8,16,32",
		"--tune-budget", budget, "--tune-out", filepath.Join(dir, "tuned.yaml"), "--tune-table", filepath.Join(dir, "selection.yaml")}
}

// TestRunTuneOnModel runs perf.sh's sweep on the model device: one run
// writes the tuned rows and the drop-in table; the rows cover every size
// once and are proven with their defines; the table hands 8 ranks to them
// and keeps every other world; the progress is on the log.
func TestRunTuneOnModel(t *testing.T) {
	log := modelGPU(t, 0)
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(tuneArgs(dir, "300s"), &out); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), log.String())
	}
	if p := log.String(); !strings.Contains(p, "tune 1/54 (") || !strings.Contains(p, "allreduce_twoshot instances=32 threads=1024: skipped: cannot be resident") {
		t.Errorf("progress:\n%s", p)
	}
	if !strings.Contains(out.String(), "# wrote ") {
		t.Errorf("output:\n%s", out.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "tuned.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# Tuned by msccl-bench --tune on one model H200, 8 ranks") {
		t.Errorf("head: %.200s", data)
	}
	var rows []compiler.SelectionRow
	if err := yaml.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	// From the smallest size timed (-b), not 0: below it nothing was
	// measured (--tune-table keeps the built-in rows there).
	if len(rows) < 2 || rows[0].MinSize != "1KiB" || rows[len(rows)-1].MaxSize != "inf" {
		t.Fatalf("rows %+v", rows)
	}
	for i, r := range rows {
		if r.Ranks[0] != 8 || r.Ranks[1] != 8 || (i > 0 && r.MinSize != rows[i-1].MaxSize) {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	// The model's LL plan wins small messages, a Simple one with more
	// blocks reducing the large ones.
	if rows[0].Algorithm != "allreduce_allpairs_packet.msccl" || rows[len(rows)-1].Algorithm == rows[0].Algorithm {
		t.Errorf("winners %+v", rows)
	}
	proveRows(t, rows)

	table, err := os.ReadFile(filepath.Join(dir, "selection.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mfs, base := libraryWith(t, table), libraryWith(t, nil)
	// The tuned rows, and below the smallest size timed (1 KiB) the
	// built-in row that served it.
	if got := picks(t, mfs, "allreduce", 8); len(got) != len(rows)+1 || got[0] != "allreduce_allpairs_packet 0..1KiB" {
		t.Errorf("the table picks %q at 8 ranks, want the built-in row below 1 KiB and the %d tuned", got, len(rows))
	}
	for _, n := range []int64{4, 16} {
		if got, want := strings.Join(picks(t, mfs, "allreduce", n), "; "), strings.Join(picks(t, base, "allreduce", n), "; "); got != want {
			t.Errorf("%d ranks: %s, shipped %s", n, got, want)
		}
	}
}

// TestRunTuneBudget: a sweep past its budget still writes rows, and says
// which candidates it did not time.
func TestRunTuneBudget(t *testing.T) {
	modelGPU(t, 40*time.Millisecond)
	dir := t.TempDir()
	if err := run(tuneArgs(dir, "100ms"), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "tuned.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "# Not timed (--tune-budget 100ms spent): ") || !strings.Contains(string(data), "- collective: allreduce") {
		t.Errorf("tuned file:\n%s", data)
	}
}

// proveRows proves each selection row's algorithm with its defines at
// its world, for every size its plan's own rule admits (which covers the
// row's range), as compiler's TestSelectionClaimsProven does.
func proveRows(t *testing.T, rows []compiler.SelectionRow) {
	t.Helper()
	if fulltest.Sample() {
		return
	}
	for _, r := range rows {
		algo := strings.TrimSuffix(r.Algorithm, ".msccl")
		src, err := algorithms.Source(algo)
		if err != nil {
			t.Fatal(err)
		}
		defs := map[string]int64{"ranks": r.Ranks[0]}
		for k, v := range r.Defines {
			defs[k] = v
		}
		p, sm, ds := compiler.CompileSource(r.Algorithm, src, defs, compiler.Options{})
		if ds.HasErrors() {
			t.Fatalf("%s with %v: %s", algo, defs, ds)
		}
		if vds := compiler.Verify(p, sm, nil, []cpu.DType{cpu.F32}); vds.HasErrors() {
			t.Errorf("%s with %v is not proven:\n%s", algo, defs, vds)
		}
	}
}
