package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1K", 1024, true}, {"256M", 256 << 20, true}, {"1G", 1 << 30, true}, {"4096", 4096, true},
		{"64MiB", 64 << 20, true}, {"0", 0, false}, {"-1K", 0, false}, {"x", 0, false},
	} {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

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

func TestArgErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--plan"},
		{[]string{"--plan", "x.json", "--algo", "y"}, "not both"},
		{[]string{"--plan", "../../testdata/peer-plans/allreduce.json", "--ranks", "4"}, "--ranks says 4"},
		{[]string{"--plan", "p.json", "-f", "1"}, "-f must be"},
		{[]string{"--algo", "no_such", "--algodir", "../../algorithms"}, "no_such"},
		{[]string{"-b", "zz", "--plan", "p.json"}, "bad size"},
		{[]string{"-D", "ranks", "--plan", "p.json"}, "NAME=VALUE"},
	} {
		var out bytes.Buffer
		err := run(c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q): got %v, want an error containing %q", c.args, err, c.want)
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
