package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
)

// fixtureSkips are the peer fixtures scripts/gpu/procs.sh's fixtures
// part must skip, with a word of the reason it must print: the cuda
// executor refuses a plan declaring a switch channel (allreduce_pipeline
// declares one it never uses), and reduce_tbg.json's race is no verdict
// to compare a GPU against (testdata/peer-plans's README, whose verdict
// column the script reads).
var fixtureSkips = map[string]string{
	"allreduce_pipeline.json":   "switch channels",
	"reduce_nvls.json":          "switch channels",
	"reduce_nvls_pipeline.json": "switch channels",
	"reduce_tbg.json":           "race",
}

// TestProcsFixturesScript runs procs.sh's fixtures part on the cpu
// device with this test binary as msccl-bench: the same list, flags and
// sizes the GPU run gets (one process per rank, -c), so the script's
// reading of the README and every command it builds are checked here.
// Every fixture of the README that the CPU executor proves correct runs
// at the sizes its own size rule starts from (the plan's, not the
// README's: a script that misread the rule fails), with no wrong element;
// the others are skipped out loud. -short runs two of them.
func TestProcsFixturesScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	files, err := filepath.Glob("../../testdata/peer-plans/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var only []string
	if fulltest.Sample() {
		only = []string{"allreduce_packet.json", "allgather_pkt_rppkt_4.json", "reduce_tbg.json", "reduce_nvls.json"}
	}
	out, code := procsScript(t, bash, "fixtures", strings.Join(only, " "))
	if code != 0 {
		t.Fatalf("procs.sh fixtures: exit %d\n%s", code, out)
	}
	runs := fixtureRuns(t, out)
	want := 0
	for _, f := range files {
		name := filepath.Base(f)
		if only != nil && !strings.Contains(" "+strings.Join(only, " ")+" ", " "+name+" ") {
			continue
		}
		if why, ok := fixtureSkips[name]; ok {
			if line := lineWith(out, "skip "+name+": "); !strings.Contains(line, why) {
				t.Errorf("%s: no line saying it is skipped for its %s:\n%s", name, why, out)
			}
			if _, ran := runs[name]; ran {
				t.Errorf("%s ran, but its verdict says to skip it", name)
			}
			continue
		}
		want++
		p, _, err := ir.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rule, err := p.SizeRule()
		if err != nil {
			t.Fatal(err)
		}
		var sizes []string
		for s := rule.Min; s <= 1<<20; s *= 37 {
			sizes = append(sizes, strconv.FormatInt(s, 10))
		}
		if got, w := strings.Join(runs[name], " "), strings.Join(sizes, " "); got != w {
			t.Errorf("%s: rows for sizes %q, want %q (the rule's smallest, %d, times 37^k up to 1 MiB)", name, got, w, rule.Min)
		}
		if !strings.Contains(out, "== "+name+" n="+strconv.Itoa(len(p.GPUs))+" ") {
			t.Errorf("%s: not run at its %d ranks:\n%s", name, len(p.GPUs), out)
		}
	}
	if len(runs) != want {
		t.Errorf("%d fixtures ran, want %d:\n%s", len(runs), want, out)
	}
	if !strings.Contains(out, "fixtures: "+strconv.Itoa(want)+" runs, 0 failed") {
		t.Errorf("summary line missing or wrong:\n%s", out)
	}
}

// A run the script cannot make is a failure it names, never a quiet
// skip: a fixture name the README lacks, and a size outside a plan's
// rule, which msccl-bench --procs refuses before it starts a process.
func TestProcsFixturesRefusals(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	out, code := procsScript(t, bash, "fixtures", "nosuch.json")
	if code == 0 || !strings.Contains(out, "FAIL FIXTURES names nosuch.json, which testdata/peer-plans/README.md has no row for") {
		t.Errorf("unknown fixture: exit %d\n%s", code, out)
	}
	stdout, stderr, code := benchCmd(t, "--procs", "2", "--device", "cpu", "--plan", "../../testdata/peer-plans/allreduce_packet.json", "-b", "96", "-e", "1M", "-c")
	if code != 1 || !strings.Contains(stderr, "message size 96 bytes is outside the plan's size rule: multiples of 64 bytes") || strings.Contains(stderr, "[rank") || stdout != "" {
		t.Errorf("size outside the rule: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// procsScript runs scripts/gpu/procs.sh PART on the cpu device from the
// repository root, with this test binary as msccl-bench and FIXTURES set
// to fixtures (all when empty), and returns its output and exit status.
func procsScript(t *testing.T, bash, part, fixtures string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "scripts/gpu/procs.sh", part)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), asCommand+"=1", "BENCH="+exe, "DEVICE=cpu", "OUT="+t.TempDir(),
		"FIXTURES="+fixtures, "RANKS=2 4 8", "IPC=")
	b, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("procs.sh %s: %v", part, err)
	}
	return string(b), cmd.ProcessState.ExitCode()
}

// fixtureRuns maps each fixture the script ran to the sizes of its rows
// (failing t for a row with wrong elements), from the "== NAME n=N ..."
// lines step prints before each run's table.
func fixtureRuns(t *testing.T, out string) map[string][]string {
	t.Helper()
	runs := map[string][]string{}
	for _, sec := range strings.Split("\n"+out, "\n== ")[1:] {
		name, _, _ := strings.Cut(sec, " ")
		runs[name] = append(runs[name], rowSizes(t, sec)...)
	}
	return runs
}

// lineWith returns the first line of out that starts with prefix, or "".
func lineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
