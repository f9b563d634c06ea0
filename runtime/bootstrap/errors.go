package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TimeoutError reports a blocking step that did not finish in time and the
// ranks it was waiting for. Every rank blocked in the same collective gets
// the same list: the root decides it and tells them all.
type TimeoutError struct {
	Op     string        // "connect", "all-gather #3", "barrier #4", "recv from rank 2 (tag 7)"
	Ranks  []int         // the ranks that did not arrive or did not answer
	After  time.Duration // the timeout that expired
	Detail string        // optional: what was last seen (e.g. the last dial error)
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bootstrap: %s timed out after %v: %s did not arrive", e.Op, e.After.Round(time.Millisecond), rankList(e.Ranks))
	if e.Detail != "" {
		b.WriteString(" (")
		b.WriteString(e.Detail)
		b.WriteString(")")
	}
	return b.String()
}

// Timeout reports true, as net.Error does.
func (e *TimeoutError) Timeout() bool { return true }

// Is makes errors.Is(err, context.DeadlineExceeded) hold for callers that
// only care that time ran out.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// PeerError reports a rank that is gone: its connection broke (Closed
// false: it died, was killed, or its host went away) or it closed its
// bootstrap while others still needed it (Closed true). A broken
// connection fails every call on every rank, since no collective can
// finish without it.
type PeerError struct {
	Op     string // what the reporting rank was doing, or what the root saw
	Rank   int
	Closed bool
	Detail string
}

func (e *PeerError) Error() string {
	what := "is gone (connection lost)"
	if e.Closed {
		what = "has closed its bootstrap"
	}
	s := fmt.Sprintf("bootstrap: %s: rank %d %s", e.Op, e.Rank, what)
	if e.Rank == 0 && !e.Closed {
		s += "; rank 0 runs the rendezvous root, so the job cannot continue"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// ProtocolError reports a rank that sent something the protocol does not
// allow (a malformed frame, a collective that does not match the others').
type ProtocolError struct {
	Rank   int
	Detail string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("bootstrap: rank %d broke the protocol: %s", e.Rank, e.Detail)
}

// ErrClosed is returned by calls on a Bootstrap after Close.
var ErrClosed = errors.New("bootstrap: closed")

func rankList(r []int) string {
	if len(r) == 0 {
		return "no rank"
	}
	s := make([]string, len(r))
	for i, x := range r {
		s[i] = fmt.Sprint(x)
	}
	if len(r) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// abortMsg turns an error decided at the root into the frame that carries
// it to every rank; abortErr reverses it.
func abortMsg(err error) *msg {
	m := &msg{kind: kAbort, op: abortProtocol, text: err.Error()}
	var te *TimeoutError
	var pe *PeerError
	var pr *ProtocolError
	switch {
	case errors.As(err, &te):
		m.op, m.opName, m.ranks, m.ms, m.text = abortTimeout, te.Op, te.Ranks, uint64(te.After/time.Millisecond), te.Detail
	case errors.As(err, &pe):
		m.op, m.opName, m.ranks, m.text = abortDead, pe.Op, []int{pe.Rank}, pe.Detail
		if pe.Closed {
			m.op = abortClosed
		}
	case errors.As(err, &pr):
		m.ranks, m.text = []int{pr.Rank}, pr.Detail
	}
	return m
}

func abortErr(m *msg) error {
	rank := 0
	if len(m.ranks) > 0 {
		rank = m.ranks[0]
	}
	switch m.op {
	case abortTimeout:
		return &TimeoutError{Op: m.opName, Ranks: m.ranks, After: time.Duration(m.ms) * time.Millisecond, Detail: m.text}
	case abortDead, abortClosed:
		return &PeerError{Op: m.opName, Rank: rank, Closed: m.op == abortClosed, Detail: m.text}
	case abortProtocol:
		if len(m.ranks) > 0 {
			return &ProtocolError{Rank: rank, Detail: m.text}
		}
	}
	return fmt.Errorf("bootstrap: the root aborted the job: %s", m.text)
}
