package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
)

func TestTuneFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tune", "--ranks", "8", "--tune-out", "t.yaml"}, "--tune needs --collective"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce"}, "--tune needs --tune-out"},
		{[]string{"--tune", "--collective", "allreduce", "--tune-out", "t.yaml"}, "--tune needs --ranks N"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "-c"}, "--tune only times plans on the GPU"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "--algo", "allreduce_ring"}, "drop --plan/--algo"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "-D", "instances=2"}, "drop -D"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "--tune-threads", "16"}, "--tune-threads: 16 is outside 32..1024"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "--tune-instances", "2,x"}, `want positive integers separated by commas, got "2,x"`},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "--tune-algos", "allreduce_twoshto"}, "did you mean allreduce_twoshot"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduc", "--tune-out", "t.yaml"}, "--collective allreduc: the built-in selection table names no algorithm for it"},
		{[]string{"--collective", "allreduce", "--algo", "allreduce_ring"}, "--collective, --tune-out, --tune-table, --tune-algos and --tune-budget go with --tune"},
		{[]string{"--tune-budget", "5m", "--algo", "allreduce_ring"}, "--tune-budget go with --tune"},
		{[]string{"--tune", "--ranks", "8", "--collective", "allreduce", "--tune-out", "t.yaml", "--tune-budget", "-1s"}, "--tune-budget: -1s is negative"},
	} {
		err := run(c.args, &bytes.Buffer{})
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v (exit %d), want %q", c.args, err, exitCode(err), c.want)
		}
	}
}

func TestTuneAlgorithms(t *testing.T) {
	tc := tuneConfig{collective: "allreduce"}
	got, err := tc.algorithms()
	if err != nil {
		t.Fatal(err)
	}
	// The single-node algorithms the built-in table names, hierarchical not.
	if s := strings.Join(got, " "); s != "allreduce_allpairs_packet allreduce_allpairs allreduce_twoshot allreduce_ring" {
		t.Errorf("candidates %q", s)
	}
}

// TestTunedRowsCompile: the rows the tuner writes are a selection table
// that compiles (every define declared) and covers every size once.
func TestTunedRowsCompile(t *testing.T) {
	ll := candidate{"allreduce_allpairs_packet", 1, 1024}
	ap := candidate{"allreduce_allpairs", 16, 512}
	ts := candidate{"allreduce_twoshot", 8, 256}
	res := []tuneResult{
		{ll, 1 << 10, 20, 0}, {ap, 1 << 10, 30, 0},
		{ll, 1 << 12, 21, 0},
		{ap, 1 << 20, 40, 0}, {ll, 1 << 20, 90, 0},
		{ap, 1 << 24, 400, 0}, {ts, 1 << 24, 500, 0},
		{ts, 1 << 26, 900, 0}, {ap, 1 << 26, 1200, 0},
		{ts, 1 << 28, 3000, 0},
	}
	best := winners(res)
	if len(best) != 6 || best[0].cand != ll || best[2].cand != ap || best[4].cand != ts {
		t.Fatalf("winners %+v", best)
	}
	rows := tunedRows("allreduce", 8, best)
	text := formatRows(rows)
	want := `- collective: allreduce
  ranks: [8, 8]
  ranks_per_node: [8, 8]
  min_message_size: 1KiB
  max_message_size: 1MiB
  algorithm: allreduce_allpairs_packet.msccl
  defines: {instances: 1, threads: 1024}

- collective: allreduce
  ranks: [8, 8]
  ranks_per_node: [8, 8]
  min_message_size: 1MiB
  max_message_size: 64MiB
  algorithm: allreduce_allpairs.msccl
  defines: {instances: 16, threads: 512}

- collective: allreduce
  ranks: [8, 8]
  ranks_per_node: [8, 8]
  min_message_size: 64MiB
  max_message_size: inf
  algorithm: allreduce_twoshot.msccl
  defines: {instances: 8, threads: 256}
`
	if text != want {
		t.Fatalf("rows:\n%s\nwant:\n%s", text, want)
	}
	plans, err := compiler.PlansFS(libraryWith(t, []byte("# head\n"+text)), algorithms.Selection, map[string]int64{"ranks": 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 3 || plans[1].Plan.NumThreadsPerBlock != 512 || len(plans[2].Plan.GPUs[0].ThreadBlocks) != 64 {
		t.Errorf("compiled %d plans; allpairs threads %d, twoshot blocks %d", len(plans), plans[1].Plan.NumThreadsPerBlock, len(plans[2].Plan.GPUs[0].ThreadBlocks))
	}
	// A tuned table replaces the shipped one only if every row is proven
	// with its defines at the world it claims (the shipped table's own
	// test, compiler's TestSelectionClaimsProven, takes a tuned file as
	// MSCCL_SELECTION).
	proveRows(t, rows)
}

// TestCandidatesInterleaved: a sweep cut short by --tune-budget has timed
// the same shapes of every algorithm.
func TestCandidatesInterleaved(t *testing.T) {
	got := candidates([]string{"a", "b"}, intList{1, 4}, intList{1024, 512})
	var labels []string
	for _, c := range got {
		labels = append(labels, fmt.Sprintf("%s/%d/%d", c.algo, c.instances, c.threads))
	}
	if s := strings.Join(labels, " "); s != "a/1/1024 b/1/1024 a/1/512 b/1/512 a/4/1024 b/4/1024 a/4/512 b/4/512" {
		t.Errorf("order %s", s)
	}
}

// TestResidencyFilter: candidates that cannot be resident on the device
// are refused before the executor is opened; the rest pass.
func TestResidencyFilter(t *testing.T) {
	h200 := residency{sms: 132, threadsPerSM: 2048, blocksPerSM: 32}
	tiny := residency{sms: 1, threadsPerSM: 1 << 20, blocksPerSM: 32}
	for _, c := range []struct {
		fit       residency
		algo      string
		instances int64
		threads   int64
		want      string
	}{
		// 8 ranks × 32 blocks × 1024 threads = 262144 of 270336 threads.
		{h200, "allreduce_twoshot", 4, 1024, ""},
		{h200, "allreduce_allpairs", 32, 1024, ""},
		// 512 blocks of 1024, 2048 blocks of 256: twice what it holds.
		{h200, "allreduce_twoshot", 8, 1024, "cannot be resident: 512 blocks of 1024 threads"},
		{h200, "allreduce_twoshot", 32, 256, "cannot be resident: 2048 blocks of 256 threads"},
		// 64 blocks on one multiprocessor of 32.
		{tiny, "allreduce_twoshot", 1, 64, "cannot be resident: 64 blocks on 1 multiprocessors of at most 32 blocks"},
		{tiny, "allreduce_allpairs", 1, 64, ""},
	} {
		src, err := algorithms.Source(c.algo)
		if err != nil {
			t.Fatal(err)
		}
		p, _, ds := compiler.CompileSource(c.algo, src, map[string]int64{"ranks": 8, "instances": c.instances, "threads": c.threads}, compiler.Options{})
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		err = c.fit.check(p)
		if got := fmt.Sprint(err); (c.want == "") != (err == nil) || (c.want != "" && !strings.Contains(got, c.want)) {
			t.Errorf("%s i%d t%d: %v, want %q", c.algo, c.instances, c.threads, err, c.want)
		}
	}
}

func TestShippedPicks(t *testing.T) {
	got := shippedPicks("allreduce", 8, []int64{1 << 10, 512 << 10, 64 << 20})
	want := map[int64]string{
		// algorithms/selection.yaml's 8-rank rows (tuned on one H200).
		1 << 10:   "allreduce_allpairs_packet instances=1 threads=256",
		512 << 10: "allreduce_allpairs_packet instances=8 threads=256",
		64 << 20:  "allreduce_allpairs instances=16 threads=1024",
	}
	for s, w := range want {
		if got[s].label() != w {
			t.Errorf("%d bytes: %q, want %q", s, got[s].label(), w)
		}
	}
}

func TestPrintWinners(t *testing.T) {
	ll := candidate{"allreduce_allpairs_packet", 1, 1024}
	ap := candidate{"allreduce_allpairs", 2, 512}
	all := []tuneResult{{ll, 1024, 20, 1}, {ap, 1024, 10, 2}}
	var b bytes.Buffer
	printWinners(&b, winners(all), all, map[int64]candidate{1024: ll})
	if got := b.String(); !strings.Contains(got, "allreduce_allpairs instances=2 threads=512") || !strings.Contains(got, "20.00     1.00     2.00  allreduce_allpairs_packet") {
		t.Errorf("printed:\n%s", got)
	}
}

func TestTuneSummary(t *testing.T) {
	c := candidate{"allreduce_twoshot", 1, 1024}
	if got := summary([]tuneResult{{c, 1024, 20.04, 0}, {c, 64 << 20, 600, 0}}); got != "1KiB 20.0us, 64MiB 600.0us" {
		t.Errorf("summary %q", got)
	}
}
