package ir

import (
	"strings"
	"testing"
)

// onePlan is a one-rank plan with the given channels and one block that
// runs ops, all as JSON.
func onePlan(channels, ops string) []byte {
	return []byte(`{"name": "t", "collective": "allreduce", "protocol": "Simple", "inplace": false,
	"gpus": [{"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
	  "channels": [` + channels + `],
	  "threadblocks": [{"id": 0, "ops": [` + ops + `]}]}]}`)
}

// TestSchemaDecode holds the table's conditional rows to what they
// promise: a key required only for some ops, read only for some kinds
// (elsewhere an unknown key), decided after the key it depends on, and
// reported at its JSON path.
func TestSchemaDecode(t *testing.T) {
	const op = "gpus[0].threadblocks[0].ops[0]"
	for _, c := range []struct {
		name, channels, ops string
		want                string // diagnostics, one a line
	}{
		{"name missing: the rest is not read", ``, `{"channel_type": "memory"}`,
			"error: " + op + `: missing required field "name"` + "\n" +
				"warning: " + op + `.channel_type: unknown field "channel_type" is ignored`},
		{"unknown op: nothing else said", ``, `{"name": "sgnal", "channel_type": "memory"}`,
			"error: " + op + `.name: unknown op "sgnal" (did you mean "signal"?)`},
		{"channel_ids needed once channel_type is known", ``, `{"name": "signal", "channel_type": "memory"}`,
			"error: " + op + `: missing required field "channel_ids"`},
		{"channel_type needed by the op", ``, `{"name": "signal", "channel_ids": [0]}`,
			"error: " + op + `: missing required field "channel_type"`},
		{"barrier keys only on barriers", ``, `{"name": "nop", "barrier_id": 1}`,
			"warning: " + op + `.barrier_id: unknown field "barrier_id" is ignored`},
		{"barrier needs both", ``, `{"name": "barrier", "barrier_id": 1}`,
			"error: " + op + `: missing required field "num_threadblocks"`},
		{"pipeline body paths", ``, `{"name": "pipeline", "iter_context": {"unit_size": 16, "num_chunks": 1},
			"ops": [{"name": "copy", "src_buff": [{"type": "i", "index": "x", "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}]}`,
			"error: " + op + `.ops[0].src_buff[0].index: expected a non-negative integer, got "x"`},
		{"reference kinds", ``, `{"name": "copy", "src_buff": [{"buffer_id": 0, "type": "i", "index": 0, "size": 1}],
			"dst_buff": [{"index": 0, "size": 1, "switch_channel_id": -1}]}`,
			"error: " + op + `.dst_buff[0].switch_channel_id: expected a non-negative integer below 2^31, got -1`},
		{"local reference needs its type", ``, `{"name": "copy", "src_buff": [{"index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}`,
			"error: " + op + `.src_buff[0]: missing required field "type"`},
		{"switch channel keys", `{"channel_type": "switch", "rank_groups": [], "connected_to": [1]}`, ``,
			"error: gpus[0].channels[0]: missing required field \"buffer_type\"\n" +
				"warning: gpus[0].channels[0].connected_to: unknown field \"connected_to\" is ignored"},
		{"memory channel keys", `{"channel_type": "memory", "connected_to": [0], "buffer_type": "i"}`, ``,
			"warning: gpus[0].channels[0].buffer_type: unknown field \"buffer_type\" is ignored"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, ds := Decode(onePlan(c.channels, c.ops))
			if got := strings.TrimSpace(ds.String()); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// A switch channel keeps the key its buffer came under ("buff" in some
// upstream plans, "buffer_type" otherwise) through decode and encode.
func TestSchemaSwitchBuffKey(t *testing.T) {
	for _, key := range []string{"buff", "buffer_type"} {
		data := onePlan(`{"`+key+`": "i", "channel_type": "switch", "rank_groups": [{"size": 1, "ranks": [0]}]}`, ``)
		p, ds := Decode(data)
		if ds.HasErrors() {
			t.Fatalf("%s: %s", key, ds)
		}
		out, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		if c := p.GPUs[0].Channels[0]; c.BuffKey != key || c.BufferType != BufInput || !strings.Contains(string(out), `"`+key+`": "i"`) {
			t.Errorf("%s: decoded %+v, encoded:\n%s", key, c, out)
		}
	}
}
