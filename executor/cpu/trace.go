package cpu

import (
	"encoding/json"
	"fmt"
)

// tracer collects the first launch as Chrome trace events: one process
// per rank, one thread per block, one complete ("X") event per op.
type tracer struct {
	s      *sim
	events []traceEvent
}

type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

func newTracer(s *sim) *tracer {
	t := &tracer{s: s}
	for r, rs := range s.ranks {
		t.events = append(t.events, traceEvent{Name: "process_name", Ph: "M", Pid: r, Args: map[string]any{"name": fmt.Sprintf("rank %d", r)}})
		for _, b := range rs.blocks {
			t.events = append(t.events, traceEvent{Name: "thread_name", Ph: "M", Pid: r, Tid: b.tb, Args: map[string]any{"name": fmt.Sprintf("block %d", b.tb)}})
		}
	}
	return t
}

// slice records one op that ran from t0 to the block's current time.
func (t *tracer) slice(b *block, op *rop, t0 float64, w int64) {
	pl := t.s.places[op.place]
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
	t.events = append(t.events, traceEvent{Name: pl.OpName, Ph: "X", Ts: t0, Dur: max(b.t-t0, 0.001), Pid: b.rank, Tid: b.tb, Args: args})
}

func (t *tracer) json() []byte {
	out, err := json.Marshal(struct {
		TraceEvents     []traceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}{t.events, "ns"})
	if err != nil {
		return nil
	}
	return out
}
