package cpu

import (
	"github.com/msccl-go/msccl-go/internal/chrometrace"
)

// tracer collects the first launch as Chrome trace events: one process
// per rank, one thread per block, one complete ("X") event per op.
type tracer struct {
	s      *sim
	events []traceEvent
	flows  int
	// Flow arrows the op now running starts (signals, releases) and ends
	// (waits, acquires); slice draws them inside the op's slice.
	starts, ends []int
}

// send allocates a flow id for a token sent in the first launch.
func (t *tracer) send(b *block) int {
	if t == nil || b.launch != 0 {
		return 0
	}
	t.flows++
	t.starts = append(t.starts, t.flows)
	return t.flows
}

// recv notes that the running op consumed a traced token.
func (t *tracer) recv(tk token) {
	if t != nil && tk.flow != 0 {
		t.ends = append(t.ends, tk.flow)
	}
}

// traceEvent is chrometrace's event: the GPU executor's timeline uses the
// same writer and names, so the two traces of a plan line up.
type traceEvent = chrometrace.Event

func newTracer(s *sim) *tracer {
	t := &tracer{s: s}
	for r, rs := range s.ranks {
		t.events = append(t.events, chrometrace.Rank(r))
		for _, b := range rs.blocks {
			t.events = append(t.events, chrometrace.Block(r, b.tb))
		}
	}
	return t
}

// slice records one op that ran from t0 to the block's current time.
func (t *tracer) slice(b *block, op *rop, t0 float64, w int64) {
	pl := t.s.place(op.place)
	args := map[string]any{"op": pl.Path()}
	if pl.Inner >= 0 {
		args["window"] = w
	}
	var n int64
	for i := range op.src {
		n = max(n, op.src[i].n)
	}
	if n > 0 {
		args["bytes"] = n
	}
	dur := max(b.t-t0, 0.001)
	t.events = append(t.events, traceEvent{Name: pl.OpName, Ph: "X", Ts: t0, Dur: dur, Pid: b.rank, Tid: b.tb, Args: args})
	mid := t0 + dur/2
	for _, id := range t.starts {
		t.events = append(t.events, traceEvent{Name: "sync", Cat: "sync", Ph: "s", ID: id, Ts: mid, Pid: b.rank, Tid: b.tb})
	}
	for _, id := range t.ends {
		t.events = append(t.events, traceEvent{Name: "sync", Cat: "sync", Ph: "f", BP: "e", ID: id, Ts: mid, Pid: b.rank, Tid: b.tb})
	}
	t.starts, t.ends = t.starts[:0], t.ends[:0]
}

func (t *tracer) json() []byte {
	out, err := chrometrace.Marshal(t.events)
	if err != nil {
		return nil
	}
	return out
}
