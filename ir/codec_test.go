package ir

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/msccl-go/msccl-go/internal/golden"
)

// peerPlans are the upstream fixtures.
const peerPlans = "../testdata/peer-plans/*.json"

func TestFixturesDecodeAndRoundTrip(t *testing.T) {
	golden.Files(t, peerPlans, func(t *testing.T, f string, data []byte) {
		p, ds := Decode(data)
		if len(ds) > 0 {
			t.Fatalf("decode diagnostics:\n%s", ds)
		}
		out, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		p2, ds := Decode(out)
		if len(ds) > 0 {
			t.Fatalf("re-decode diagnostics:\n%s", ds)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("decode → encode → decode changed the plan")
		}
		out2, _ := Encode(p2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable")
		}
	})
}
