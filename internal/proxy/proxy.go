package proxy

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Kind says what a trigger asks for; a put with signal carries both bits.
type Kind uint8

const (
	// Put: copy Src to Dst (LL packets when Packets is set).
	Put Kind = 1 << iota
	// Signal: after the put, if any, add one to the peer's semaphore of
	// this channel, so its wait sees the put's data.
	Signal
)

func (k Kind) String() string {
	var s []string
	if k&Put != 0 {
		s = append(s, "put")
	}
	if k&Signal != 0 {
		s = append(s, "signal")
	}
	if len(s) == 0 {
		return fmt.Sprintf("kind %d", uint8(k))
	}
	return strings.Join(s, "+")
}

// Trigger is one request of a port channel as the proxy pops it. The
// proxy serves its rank's requests strictly in order; a flush on the
// device side waits until every trigger pushed before it has been
// handled (HandleTrigger returned).
type Trigger struct {
	Kind Kind
	// Rank is this rank, Peer the channel's peer and Channel its index
	// among the rank's port channels (-1 when the request names none:
	// a put of the executor whose signal goes separately).
	Rank, Peer, Channel int
	// Seq numbers the rank's triggers from 1.
	Seq uint64
	// Src and Dst are the put's bytes as this process maps them (Dst is
	// in the peer's buffer); nil without Put. With Packets, Src is the
	// payload and Dst the packet buffer it is written into as LL
	// packets tagged with the launch's flag (only Default writes those).
	Src, Dst []byte
	Packets  bool
	// SrcPtr and DstPtr are the put's addresses where the data is device
	// memory (the cuda device: Src and Dst are then nil), Bytes its size
	// on either device.
	SrcPtr, DstPtr uint64
	Bytes          uint64

	perform func() // the built-in handling of the whole trigger
	signal  func() // the built-in signal alone
}

// NewTrigger is for proxies: perform does what Default does with the
// trigger, signal raises the peer's semaphore alone (nil without Signal).
func NewTrigger(t Trigger, perform, signal func()) Trigger {
	t.perform, t.signal = perform, signal
	return t
}

// Default performs the trigger as the built-in proxy does.
func (t Trigger) Default() Result {
	if t.perform != nil {
		t.perform()
	}
	return Result{}
}

// RaiseSignal adds one to the peer's semaphore of the channel, what the
// Signal bit asks; for a handler that moves the data its own way and then
// signals. It does nothing when the trigger does not carry Signal.
func (t Trigger) RaiseSignal() {
	if t.Kind&Signal != 0 && t.signal != nil {
		t.signal()
	}
}

func (t Trigger) String() string {
	return fmt.Sprintf("trigger #%d of rank %d: %s on port channel %d (peer rank %d, %d bytes)", t.Seq, t.Rank, t.Kind, t.Channel, t.Peer, t.Bytes)
}

// Result is what a handler reports; a non-nil Err fails the run that
// pushed the trigger.
type Result struct {
	Err error
}

// Handler serves a port channel's triggers. HandleTrigger is called from
// the proxy's one goroutine, in order; it must be done with the trigger
// (data copied, signal raised) when it returns. A handler that panics or
// returns an error fails the run; one that blocks past the run's
// timeout is named by the watchdog.
type Handler interface {
	HandleTrigger(Trigger) Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(Trigger) Result

func (f HandlerFunc) HandleTrigger(t Trigger) Result { return f(t) }

// DefaultHandler is the built-in handling: copy, then signal.
type DefaultHandler struct{}

func (DefaultHandler) HandleTrigger(t Trigger) Result { return t.Default() }

// Serving tracks the trigger a proxy's handler is busy with, so that a
// hang report can name a handler that blocks.
type Serving struct {
	mu    sync.Mutex
	busy  bool
	t     Trigger
	since time.Time
	h     Handler
}

// Serve calls h on t, turning a panic into an error that names the
// handler, the trigger and the panic's stack.
func (s *Serving) Serve(h Handler, t Trigger) (res Result) {
	s.mu.Lock()
	s.busy, s.t, s.since, s.h = true, t, time.Now(), h
	s.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			res = Result{Err: fmt.Errorf("proxy handler %T panicked on %s: %v\n%s", h, t, p, debug.Stack())}
		}
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}()
	return h.HandleTrigger(t)
}

// Busy describes the trigger the handler has been serving for longer
// than after, or "" when it is idle or has not been at it that long.
func (s *Serving) Busy(after time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.busy {
		return ""
	}
	if d := time.Since(s.since); d >= after {
		return fmt.Sprintf("proxy handler %T has been serving %s for %v", s.h, s.t, d.Round(time.Millisecond))
	}
	return ""
}

// WaitTimeout waits for wg up to d and reports whether it finished: a
// proxy stopping a handler that may block waits this long, then gives up
// on it (its goroutine leaks) rather than hang.
func WaitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
