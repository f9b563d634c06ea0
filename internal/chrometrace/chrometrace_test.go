package chrometrace

import (
	"encoding/json"
	"testing"
)

func TestMarshalNames(t *testing.T) {
	b, err := Marshal([]Event{Rank(2), Block(2, 5), {Name: "put", Ph: "X", Ts: 1.5, Dur: 2, Pid: 2, Tid: 5}})
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []map[string]any `json:"traceEvents"`
		Unit        string           `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.TraceEvents) != 3 || f.Unit != "ns" {
		t.Fatalf("%s", b)
	}
	if n := f.TraceEvents[0]["args"].(map[string]any)["name"]; n != "rank 2" {
		t.Errorf("process name %v", n)
	}
	if n := f.TraceEvents[1]["args"].(map[string]any)["name"]; n != "block 5" || f.TraceEvents[1]["tid"] != 5.0 {
		t.Errorf("thread name %v", f.TraceEvents[1])
	}
}
