// Package chrometrace writes Chrome trace-event JSON (what Perfetto and
// chrome://tracing open), for the CPU executor's simulated timeline and
// the GPU executor's measured one. Both name processes and threads
// through Rank and Block, so the two files of one plan line up side by
// side: one process per rank, one thread per block, one complete ("X")
// event per op named after the op, args.op its path in the plan.
//
// It knows nothing of plans or executors.
package chrometrace

import (
	"encoding/json"
	"fmt"
)

// Event is one trace event; Ts and Dur are microseconds.
type Event struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
	Cat  string         `json:"cat,omitempty"`
	ID   int            `json:"id,omitempty"`
	BP   string         `json:"bp,omitempty"`
}

// Rank names process pid after the rank.
func Rank(pid int) Event {
	return Event{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": fmt.Sprintf("rank %d", pid)}}
}

// Block names thread tid of process pid after the thread block.
func Block(pid, tid int) Event {
	return Event{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": fmt.Sprintf("block %d", tid)}}
}

// Marshal encodes events as a trace file.
func Marshal(events []Event) ([]byte, error) {
	return json.Marshal(struct {
		TraceEvents     []Event `json:"traceEvents"`
		DisplayTimeUnit string  `json:"displayTimeUnit"`
	}{events, "ns"})
}
