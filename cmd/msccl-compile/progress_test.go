package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// On a terminal a step that lasts draws its line and end clears it; off a
// terminal (a pipe, a log, a bytes.Buffer) nothing is written at all.
func TestProgress(t *testing.T) {
	// end orders the drawing before the read; a loaded machine may be
	// slow to tick, so the step is given longer until it draws.
	var out string
	for d := 50 * time.Millisecond; d < 10*time.Second && !strings.Contains(out, "… "); d *= 2 {
		var w bytes.Buffer
		p := startProgress(&w, true, 10*time.Millisecond)
		p.step("sim plan.json at 4GiB")
		time.Sleep(d)
		p.end()
		out = w.String()
	}
	if !strings.HasPrefix(out, "\r\033[Ksim plan.json at 4GiB … ") || !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("terminal: %q", out)
	}

	var off bytes.Buffer
	if isTerminal(&off) {
		t.Fatal("a bytes.Buffer is no terminal")
	}
	q := newProgress(&off)
	q.step("plans")
	time.Sleep(20 * time.Millisecond)
	q.end()
	if off.Len() != 0 {
		t.Errorf("off a terminal wrote %q", off.String())
	}
}
