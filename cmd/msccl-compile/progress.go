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

	mu    sync.Mutex
	what  string
	start time.Time
	shown bool
	stop  chan struct{}
	done  chan struct{}
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
	if !tty {
		return p
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
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

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	if p.what == "" || el < p.every {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%s … %v", p.what, el.Round(time.Second))
	p.shown = true
}

// end stops the line and clears it, before the command prints its
// verdict or errors.
func (p *progress) end() {
	if !p.tty {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
