package compiler

import (
	"regexp"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"golang.org/x/tools/txtar"
)

// Bugs found while building testdata/wrong and TestDifferential, since
// fixed: each test states the behaviour we want and keeps the fix honest.

// corpusSource returns input.msccl of a testdata/wrong case.
func corpusSource(t *testing.T, name string) []byte {
	t.Helper()
	ar, err := txtar.ParseFile("../testdata/wrong/" + name + ".txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name == "input.msccl" {
			return f.Data
		}
	}
	t.Fatalf("%s has no input.msccl", name)
	return nil
}

// TestSizeRuleFollowsDefinition (found as a bug: ir.(*Plan).SizeRule did
// not see the chunk geometry of data that passes through uniform scratch
// slots; it now adds the pairs of chunks the collective's definition
// relates).
// The three plans below are correct at every size where their reference
// buffer splits evenly into its chunks, but the rule admits other sizes:
//
//   - wrong_fragile_3 (alltoall, 2 ranks, input[p] -> scratch -> output[r]):
//     rule "multiples of 16 bytes from 32 bytes"; at 48 bytes input chunk 1
//     (1 unit) lands in output chunk 0 (2 units): wrong bytes;
//   - wrong_fragile_4 (the same at 4 ranks): rule "multiples of 16 bytes
//     from 64 bytes"; at 80 and 112 bytes the executor cannot even define
//     the alltoall ("not a whole number of symbolic elements per rank"),
//     at 96 bytes wrong bytes;
//   - wrong_fragile_5 (reducescatter chunks 2, 2 ranks, output written
//     only from scratch): rule "multiples of 32 bytes from 64 bytes"; at
//     96 bytes output chunk 1 ends at byte 64 of a 48-byte output ("past
//     the 48 bytes of rank 0's output").
//
// So the compiler rejects plans whose only defect is the rule (with
// "the proof could not run" at the collective line, or a wrong result), where it
// should narrow the rule to even splits and prove them; and with
// --no-verify it writes size_granularity 16 / 32 into plans that are
// wrong or unrunnable at the sizes that admits. Want: the rule excludes
// those sizes and Verify proves the plan over its rule.
func TestSizeRuleFollowsDefinition(t *testing.T) {
	for _, c := range []struct {
		name string
		bad  int64
	}{{"wrong_fragile_3", 48}, {"wrong_fragile_4", 80}, {"wrong_fragile_5", 96}} {
		t.Run(c.name, func(t *testing.T) {
			p, sm, ds := CompileSource("input.msccl", corpusSource(t, c.name), nil, Options{Check: true})
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			rule, err := p.SizeRule()
			if err != nil {
				t.Fatal(err)
			}
			if rule.Admits(c.bad) {
				t.Errorf("rule %s admits %d bytes, where the plan is wrong or cannot run", rule, c.bad)
			}
			if vds := Verify(p, sm, nil, []cpu.DType{cpu.F32}); len(vds) > 0 {
				t.Errorf("the plan is correct at every even split, but its proof fails:\n%s", vds)
			}
		})
	}
}

// TestWaitWithoutSignalUnderCheck (found as a bug): a channel-level wait whose peer
// block never signals at all (wrong_deadlock_3) is reported under
// Options{Check: true} as "internal compiler error after pass channels:
// ... can never return", because ir.Validate after the channels pass
// fires before the limits pass counts signals and waits. Without Check
// (msccl-compile) the same program gets the proper "wait with no matching
// signal" at the wait. A user error must not read as a compiler bug.
func TestWaitWithoutSignalUnderCheck(t *testing.T) {
	_, _, ds := CompileSource("input.msccl", corpusSource(t, "wrong_deadlock_3"), nil, Options{Check: true})
	s := ds.String()
	if strings.Contains(s, "internal compiler error") || !strings.Contains(s, "input.msccl:10:3: error: wait with no matching signal") {
		t.Errorf("want \"wait with no matching signal\" at the wait, got:\n%s", s)
	}
}

// TestFoldingSkipsItsOwnRun (found as a bug): Verify folds repeated findings and lists the
// runs that repeat one as "the same at RUN", but a finding the same run
// reports more than once (an input clobbered in every launch) lists that
// very run: "run 16 bytes, symbolic; the same at 16 bytes, symbolic; ..."
// (testdata/wrong/wrong_clobber_1.txtar and other clobber goldens).
func TestFoldingSkipsItsOwnRun(t *testing.T) {
	p, sm, ds := CompileSource("input.msccl", corpusSource(t, "wrong_clobber_1"), nil, Options{Check: true})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	out := Verify(p, sm, nil, corpusDTypes).String()
	self := regexp.MustCompile(`run ([0-9]+ bytes, [a-z0-9]+); the same at ([^;]*; )*?([0-9]+ bytes, [a-z0-9]+)`)
	for _, m := range self.FindAllStringSubmatch(out, -1) {
		if strings.Contains(m[0], "the same at "+m[1]) {
			t.Errorf("a finding lists its own run as a repeat: %s", m[0])
		}
	}
}
