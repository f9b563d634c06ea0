package ir

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestSwitchRefRank: upstream v0.10 writes a "rank" on switch-channel
// src_buff entries. It decodes without a warning, survives Encode, and a
// rank outside the channel's group is an error at the key.
func TestSwitchRefRank(t *testing.T) {
	raw, err := os.ReadFile("../testdata/peer-plans/reduce_nvls.json")
	if err != nil {
		t.Fatal(err)
	}
	// withRank adds "rank": r to every switch-channel src_buff entry.
	withRank := func(r int) []byte {
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // max_message_size does not fit a float64
		if err := dec.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range doc["gpus"].([]any) {
			for _, tb := range g.(map[string]any)["threadblocks"].([]any) {
				for _, op := range tb.(map[string]any)["ops"].([]any) {
					srcs, _ := op.(map[string]any)["src_buff"].([]any)
					for _, b := range srcs {
						if e := b.(map[string]any); e["switch_channel_id"] != nil {
							e["rank"] = r
							n++
						}
					}
				}
			}
		}
		if n == 0 {
			t.Fatal("the fixture has no switch src_buff entry")
		}
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	src := withRank(1)
	p, ds, err := Load(src)
	if err != nil || len(ds) > 0 {
		t.Fatalf("Load: %v\n%s", err, ds)
	}
	ref := p.GPUs[0].ThreadBlocks[0].Ops[5].Src[0]
	if ref.Kind != RefSwitch || !ref.HasRank || ref.Rank != 1 {
		t.Fatalf("decoded %+v, want a switch reference with rank 1", ref)
	}
	js, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"rank": 1`) && !strings.Contains(string(js), `"rank":1`) {
		t.Fatalf("Encode dropped the rank:\n%s", js)
	}
	if q, ds, err := Load(js); err != nil || len(ds) > 0 || q.GPUs[0].ThreadBlocks[0].Ops[5].Src[0] != ref {
		t.Fatalf("round trip: %v\n%s", err, ds)
	}
	_, ds, _ = Load(withRank(5))
	if !strings.Contains(ds.String(), ".src_buff[0].rank") || !strings.Contains(ds.String(), "not a member of switch channel 0") {
		t.Fatalf("rank 5 of a 2-rank group: want an error at .rank, got:\n%s", ds)
	}
}
