package main

import (
	"bytes"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

func TestBusFactor(t *testing.T) {
	for _, c := range []struct {
		col  ir.Collective
		n    int
		want float64
	}{
		{ir.AllReduce, 8, 1.75}, {ir.AllGather, 8, 0.875}, {ir.ReduceScatter, 2, 0.5}, {ir.AllToAll, 4, 0.75}, {ir.SendRecv, 2, 1},
	} {
		if got := busFactor(c.col, c.n); got != c.want {
			t.Errorf("busFactor(%s, %d) = %v, want %v", c.col, c.n, got, c.want)
		}
	}
}

const (
	peer = "../../testdata/peer-plans/"
	lib  = "../../algorithms"
)

// Every bad invocation ends before the GPU with one line (what main
// prints after "msccl-bench: ") and its exit status: 2 for a wrong
// invocation, 1 for an input that cannot be run.
func TestArgErrors(t *testing.T) {
	t.Setenv("MSCCL_HOST_MEMORY", "")
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{nil, "give --plan PLAN.json or --algo NAME (msccl-bench -h lists the flags)", 2},
		{[]string{"--plan", "x.json", "--algo", "y"}, "give --plan or --algo, not both", 2},
		{[]string{"--plan", peer + "allreduce.json", "--ranks", "4"}, peer + "allreduce.json has 2 ranks, --ranks says 4", 1},
		{[]string{"--plan", "p.json", "-f", "1"}, "-f must be at least 2, got 1", 2},
		{[]string{"--plan", "p.json", "-n", "0"}, "-n must be at least 1, got 0", 2},
		{[]string{"--plan", "p.json", "--ll", "4"}, "--ll must be 8 or 16, got 4", 2},
		{[]string{"--plan", "p.json", "-d", "f64"}, `-d: unknown data type "f64"`, 2},
		{[]string{"--plan", "p.json", "-o", "avg"}, `-o: unknown reduction "avg" (want sum, min, max or prod)`, 2},
		{[]string{"-b", "zz", "--plan", "p.json"}, `-b: invalid size "zz": want a positive byte count such as 4096, 64K, 1MiB or 1G`, 2},
		{[]string{"-e", "9999999999G", "--plan", "p.json"}, `-e: size "9999999999G" is too large: more than 2^63-1 bytes`, 2},
		{[]string{"-b", "1M", "-e", "1K", "--plan", "p.json"}, "-b 1M is above -e 1K: the sweep would be empty", 2},
		{[]string{"--ranks", "0", "--algo", "allreduce_ring", "--algodir", lib}, "--ranks must be at least 1, got 0", 2},
		{[]string{"--ranks", "-3", "--plan", "p.json"}, "--ranks must be at least 1, got -3", 2},
		{[]string{"--plan", "p.json", "extra"}, `unexpected argument "extra": msccl-bench takes flags only (--plan PLAN.json or --algo NAME)`, 2},
		{[]string{"--nosuch"}, "flag provided but not defined: -nosuch (msccl-bench -h lists the flags)", 2},
		{[]string{"-D", "ranks", "--plan", "p.json"}, `invalid value "ranks" for flag -D: -D wants NAME=VALUE, got "ranks" (msccl-bench -h lists the flags)`, 2},
		{[]string{"--algo", "allreduce_rign", "--algodir", lib}, "--algo allreduce_rign: no such algorithm in ../../algorithms (did you mean allreduce_ring?)", 1},
		{[]string{"--algo", "allreduce", "--algodir", lib}, "--algo allreduce: no such algorithm in ../../algorithms (did you mean allreduce_ring, allreduce_twoshot, allreduce_allpairs?)", 1},
		{[]string{"--algo", "nosuch", "--algodir", lib}, "--algo nosuch: no such algorithm in ../../algorithms (it has allgather_direct, ", 1},
		{[]string{"--algo", "x", "--algodir", "testdata/none"}, "--algo x: testdata/none holds no algorithms (*.msccl); set --algodir", 1},
		// Without --algodir, the library built into the binary.
		{[]string{"--algo", "allreduce_rign"}, "--algo allreduce_rign: no such algorithm in the built-in library (did you mean allreduce_ring?)", 1},
		// The overflow the sweep guards against: 2^62 bytes is refused
		// as more than any GPU holds, not handed to the allocator.
		{[]string{"--plan", peer + "allreduce.json", "-b", "1", "-e", "9223372036854775807"}, "-e: at 4294967296GiB allreduce.json needs about 8EiB of device memory (2 ranks on one GPU), more than the 512GiB any GPU holds; lower -e", 1},
		{[]string{"--plan", peer + "allreduce.json", "-b", "1G", "-e", "256G"}, "-e: at 256GiB allreduce.json needs about 1", 1},
		{[]string{"--plan", peer + "allreduce_packet.json", "-b", "1040", "-e", "1040"}, "allreduce_packet.json: message size 1040 bytes is outside the plan's size rule: multiples of 64 bytes", 1},
	} {
		var out bytes.Buffer
		err := run(c.args, &out)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("run(%q): got %v, want one line starting %q", c.args, err, c.want)
		}
		if got := exitCode(err); got != c.code {
			t.Errorf("run(%q): exit status %d, want %d", c.args, got, c.code)
		}
		if out.Len() != 0 {
			t.Errorf("run(%q) printed %q before failing", c.args, out.String())
		}
	}
}

// -c refuses a sweep whose CPU reference would not fit in host memory,
// with both numbers, before the GPU (here with the budget set by
// $MSCCL_HOST_MEMORY so the numbers do not depend on this host).
func TestRefusesReferenceAboveHostMemory(t *testing.T) {
	t.Setenv("MSCCL_HOST_MEMORY", "64MiB")
	var out bytes.Buffer
	err := run([]string{"--plan", peer + "allreduce_packet.json", "-b", "1K", "-e", "4M", "-c"}, &out)
	want := "-c: the CPU reference for allreduce_packet.json at 4MiB needs about 96MiB of host memory, more than 64MiB allowed ($MSCCL_HOST_MEMORY); lower -e or leave out -c"
	if err == nil || err.Error() != want || exitCode(err) != 1 {
		t.Fatalf("got %v (exit %d)\nwant %s", err, exitCode(err), want)
	}
	t.Setenv("MSCCL_HOST_MEMORY", "lots")
	err = run([]string{"--plan", peer + "allreduce_packet.json", "-b", "1K", "-e", "4M", "-c"}, &out)
	if err == nil || !strings.HasPrefix(err.Error(), `$MSCCL_HOST_MEMORY: invalid size "lots"`) {
		t.Fatalf("bad $MSCCL_HOST_MEMORY: %v", err)
	}
}

// --device cpu refuses, before starting any rank, a sweep whose buffers
// would not fit in host memory (they live in this host's shared memory),
// naming both numbers; a size that fits is not refused by the check.
func TestCPUDeviceRefusesAboveHostMemory(t *testing.T) {
	t.Setenv("MSCCL_HOST_MEMORY", "64MiB")
	var out bytes.Buffer
	err := run([]string{"--procs", "4", "--device", "cpu", "--algo", "allreduce_twoshot", "--ranks", "4", "-b", "32M", "-e", "32M"}, &out)
	want := "--device cpu: allreduce_twoshot at 32MiB (4 ranks' buffers in this host's shared memory) needs about "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "more than 64MiB allowed ($MSCCL_HOST_MEMORY); lower -e") || exitCode(err) != 1 {
		t.Fatalf("got %v (exit %d)\nwant %s...", err, exitCode(err), want)
	}
	p, _, err := loadPlan(&config{algo: "allreduce_twoshot", ranks: 4, defs: map[string]int64{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkHostDevice(p, "allreduce_twoshot", []int64{1 << 10}); err != nil {
		t.Errorf("1KiB refused: %v", err)
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		var out bytes.Buffer
		err := run([]string{arg}, &out)
		if err != nil || exitCode(err) != 0 || !strings.HasPrefix(out.String(), "usage: msccl-bench (--plan PLAN.json | --algo NAME") || !strings.Contains(out.String(), "-timeout") {
			t.Errorf("run(%s) = %v, printed %q", arg, err, out.String())
		}
	}
	var out bytes.Buffer
	err := run([]string{"--version"}, &out)
	if err != nil || !strings.HasPrefix(out.String(), "msccl-bench ") || !strings.HasSuffix(out.String(), runtime.Version()+"\n") {
		t.Errorf("--version = %v, %q", err, out.String())
	}
}

// The exit decision is made on the rows after the table is printed.
func TestVerdict(t *testing.T) {
	ok := Row{Bytes: 1024, Wrong: 0}
	unchecked := Row{Bytes: 2048, Wrong: -1}
	wrong := Row{Bytes: 4096, Wrong: 12}
	skipped := Row{Bytes: 1 << 30, Wrong: -1, Skipped: "cuMemAlloc: out of memory\n(1 GiB)"}
	for _, c := range []struct {
		rows []Row
		want string
	}{
		{nil, ""},
		{[]Row{ok, unchecked}, ""},
		{[]Row{ok, wrong}, "wrong results at 1 of 2 sizes: 4KiB (12 wrong)"},
		{[]Row{ok, skipped}, "1 of 2 sizes skipped: 1GiB (cuMemAlloc: out of memory (1 GiB))"},
		{[]Row{wrong, ok, skipped}, "wrong results at 1 of 3 sizes: 4KiB (12 wrong); 1 of 3 sizes skipped: 1GiB (cuMemAlloc: out of memory (1 GiB))"},
	} {
		err := verdict(c.rows)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("verdict(%v) = %q, want %q", c.rows, got, c.want)
		}
		if want := map[bool]int{true: 0, false: 1}[c.want == ""]; exitCode(err) != want {
			t.Errorf("verdict(%v): exit status %d, want %d", c.rows, exitCode(err), want)
		}
	}
}

// A size outside the plan's rule is refused before any GPU work, with the
// rule in the message (allreduce_packet.json needs sizes that split into
// its 4 chunks evenly: multiples of 64 bytes).
func TestRefusesSizeOutsideRule(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"--plan", "../../testdata/peer-plans/allreduce_packet.json", "-b", "1K", "-e", "1040", "-f", "2"}, &out)
	if err != nil && strings.Contains(err.Error(), "size rule") {
		t.Fatalf("in-rule sweep refused: %v", err)
	}
	err = run([]string{"--plan", "../../testdata/peer-plans/allreduce_packet.json", "-b", "1040", "-e", "1040"}, &out)
	if err == nil || !strings.Contains(err.Error(), "outside the plan's size rule: multiples of 64 bytes") {
		t.Fatalf("got %v, want a refusal naming the rule", err)
	}
}

func TestSweepStopsBeforeOverflow(t *testing.T) {
	got := sweep(1, math.MaxInt64, 2)
	if len(got) != 63 || got[62] != 1<<62 {
		t.Fatalf("sweep to MaxInt64 gave %d sizes ending %d", len(got), got[len(got)-1])
	}
}
