package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// proveJSON compiles path with params and returns msccl_verify's proof
// verdict under options.
func proveJSON(t *testing.T, path, params, options string) verdictJSON {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, ds, err := compileSource(path, src, params)
	if err != nil {
		t.Fatalf("compile %s: %v (%v)", path, err, ds)
	}
	defer table.release(h)
	out, err := verify(h, options)
	if err != nil {
		t.Fatalf("%s %s: %v", path, options, err)
	}
	var v verdictJSON
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestProveConsistency: msccl_verify's proof carries the rank-consistency
// verdict of msccl-compile compile (the ring allreduce is consistent, the
// one-shot at three ranks is not), and require_consistent refuses the
// one-shot with --require-consistent's message.
func TestProveConsistency(t *testing.T) {
	v := proveJSON(t, ring, `{"ranks": 4}`, `{"require_consistent": true}`)
	if c := v.Consistency; !v.OK || c == nil || c.Consistent == nil || !*c.Consistent || !c.Identical || !c.OrderFixed ||
		!strings.HasPrefix(c.Summary, "rank-consistent: yes") || c.Reason != "" {
		t.Errorf("ring: ok %v, %q, consistency %+v", v.OK, v.Verdict, c)
	}
	const oneshot = "../testdata/consistency/allreduce_oneshot.msccl"
	v = proveJSON(t, oneshot, `{"ranks": 3}`, ``)
	c := v.Consistency
	if !v.OK || v.Verdict != "correct" || c == nil || c.Consistent == nil || *c.Consistent || c.Identical ||
		!strings.HasPrefix(c.Summary, "rank-consistent: no, ") || !strings.HasPrefix(c.Reason, "the plan is not rank-consistent: rank ") {
		t.Fatalf("one-shot: ok %v, %q, consistency %+v; want correct and not rank-consistent", v.OK, v.Verdict, c)
	}
	r := proveJSON(t, oneshot, `{"ranks": 3}`, `{"require_consistent": true}`)
	if r.OK || r.Verdict != "not rank-consistent" || r.Consistency == nil || r.Consistency.Reason != c.Reason {
		t.Errorf("one-shot, consistency required: ok %v, %q, %+v; want refused with %q", r.OK, r.Verdict, r.Consistency, c.Reason)
	}
	// One run says nothing about consistency: the option is refused.
	h := compileRing(t, `{"ranks": 2}`)
	defer table.release(h)
	st, msg := guard(func() error { _, err := verify(h, `{"size": 1024, "require_consistent": true}`); return err })
	if st != statusInvalid || !strings.Contains(msg, "require_consistent asks the proof") {
		t.Errorf("require_consistent with a size: %s %q", statusName[st], msg)
	}
}
