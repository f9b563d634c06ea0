package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the drawing goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// On a terminal a step that lasts draws its line and end clears it; off a
// terminal (a pipe, a log, a bytes.Buffer) nothing is written at all.
func TestProgress(t *testing.T) {
	var w syncBuffer
	p := startProgress(&w, true, 10*time.Millisecond)
	p.step("sim plan.json at 4GiB")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(w.String(), "sim plan.json at 4GiB … ") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.end()
	out := w.String()
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
