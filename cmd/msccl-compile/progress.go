package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// A long command (sim of a large size, plans with their proofs) is
// silent for minutes otherwise; on a terminal it redraws one status line
// on standard error with what it is doing and for how long. Redirected
// (a log, a pipe, a test) it writes nothing, so outputs stay the same.

// progressDelay is how long a step runs before its line appears, so
// quick commands never draw one.
const progressDelay = time.Second

// progress is the status line; the zero of tty makes every call a no-op.
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration

	mu      sync.Mutex
	what    string
	start   time.Time
	shown   bool
	stopped bool
	timer   *time.Timer
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress starts the status line on w if it is a terminal.
func newProgress(w io.Writer) *progress {
	return startProgress(w, isTerminal(w), progressDelay)
}

func startProgress(w io.Writer, tty bool, every time.Duration) *progress {
	p := &progress{w: w, tty: tty, every: every, start: time.Now()}
	if tty {
		p.timer = time.AfterFunc(every, p.tick)
	}
	return p
}

// tick redraws the line and arms the next redraw, until end.
func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if el := time.Since(p.start); p.what != "" && el >= p.every {
		fmt.Fprintf(p.w, "\r\033[K%s … %v", p.what, el.Round(time.Second))
		p.shown = true
	}
	p.timer.Reset(p.every)
}

// step names what runs from now on ("verifying allreduce_ring (3/12)").
func (p *progress) step(what string) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	p.what, p.start = what, time.Now()
	p.mu.Unlock()
}

// end stops the line and clears it, before the command prints its
// verdict or errors; no redraw follows it.
func (p *progress) end() {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.timer.Stop()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
