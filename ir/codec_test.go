package ir

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func fixtures(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../testdata/peer-plans/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	return files
}

func TestFixturesDecodeAndRoundTrip(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
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
}
