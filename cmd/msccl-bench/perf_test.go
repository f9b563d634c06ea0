package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReferenceFlag(t *testing.T) {
	err := run([]string{"--plan", "p.json", "--reference", "allreduce_ring"}, &bytes.Buffer{})
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), `--reference: no reference kernel "allreduce_ring" (have allreduce_oneshot_ll, allreduce_twoshot, allgather_direct)`) {
		t.Errorf("got %v (exit %d)", err, exitCode(err))
	}
}

func TestVerdictCountsReference(t *testing.T) {
	rows := []Row{
		{Bytes: 1024, Wrong: 0, Ref: &RefRow{Name: "allreduce_twoshot", Wrong: 3}},
		{Bytes: 2048, Wrong: 0, Ref: &RefRow{Name: "allreduce_twoshot", Wrong: -1, Skipped: "a chunk of 8 bytes"}},
	}
	err := verdict(rows)
	want := "wrong results at 1 of 2 sizes: 1KiB (reference allreduce_twoshot: 3 wrong); 1 of 2 sizes skipped: 2KiB (reference allreduce_twoshot: a chunk of 8 bytes)"
	if err == nil || err.Error() != want {
		t.Errorf("verdict: %v\nwant %s", err, want)
	}
}

func TestPrintRef(t *testing.T) {
	var b bytes.Buffer
	printRef(&b, &Row{})
	printRef(&b, &Row{Ref: &RefRow{Name: "allgather_direct", TimeUs: 10, AlgBW: 1, BusBW: 2, Wrong: 0, Ratio: 1.5}})
	if got := b.String(); !strings.Contains(got, "reference allgather_direct") || !strings.Contains(got, "plan/reference 1.50") || strings.Count(got, "\n") != 1 {
		t.Errorf("printed %q", got)
	}
}

func TestTraceFlag(t *testing.T) {
	err := run([]string{"--plan", "p.json", "--trace", "out.txt"}, &bytes.Buffer{})
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--trace out.txt: the file name must end in .json") {
		t.Errorf("got %v (exit %d)", err, exitCode(err))
	}
	p := perfConfig{trace: "/tmp/x/ring.json"}
	if g, c := p.tracePaths(1024); g != "/tmp/x/ring.json" || c != "/tmp/x/ring.cpu.json" {
		t.Errorf("one size: %s %s", g, c)
	}
	p.multi = true
	if g, c := p.tracePaths(1 << 20); g != "/tmp/x/ring-1MiB.json" || c != "/tmp/x/ring-1MiB.cpu.json" {
		t.Errorf("sweep: %s %s", g, c)
	}
	if (&perfConfig{}).traceRecords() != 0 || p.traceRecords() == 0 {
		t.Error("traceRecords: the untraced instance must run without --trace")
	}
}

func TestPerfFlagsNeedGPU(t *testing.T) {
	for _, args := range [][]string{
		{"--plan", "p.json", "--device", "cpu", "--reference", "allreduce_twoshot"},
		{"--plan", "p.json", "--device", "cpu", "--trace", "t.json"},
	} {
		err := run(args, &bytes.Buffer{})
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "need --device cuda") {
			t.Errorf("%q: got %v (exit %d)", args, err, exitCode(err))
		}
	}
}
