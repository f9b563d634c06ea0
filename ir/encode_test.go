package ir_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/ir"
)

// TestEncodeMatchesReflect holds the hand-written encoder to the
// reflect-based one on every peer fixture and every library algorithm at
// 2, 4, 8 and 16 ranks.
func TestEncodeMatchesReflect(t *testing.T) {
	var plans []*ir.Plan
	var names []string
	fixtures, _ := filepath.Glob("../testdata/peer-plans/*.json")
	for _, f := range fixtures {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, ds := ir.Decode(data)
		if p == nil {
			t.Fatalf("%s: %s", f, ds)
		}
		plans, names = append(plans, p), append(names, f)
	}
	algos, _ := filepath.Glob("../algorithms/*.msccl")
	for _, f := range algos {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{2, 4, 8, 16} {
			defs := map[string]int64{"ranks": n}
			if strings.Contains(string(src), "param gpus_per_node") {
				defs["nodes"], defs["gpus_per_node"] = 2, n/2
			}
			p, _, ds := compiler.CompileSource(f, src, defs, compiler.Options{})
			if ds.HasErrors() {
				continue
			}
			plans, names = append(plans, p), append(names, fmt.Sprintf("%s@%d", f, n))
		}
	}
	if len(plans) < 40 {
		t.Fatalf("only %d plans to compare", len(plans))
	}
	for i, p := range plans {
		got, err := ir.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ir.EncodeReflect(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			k := 0
			for k < len(got) && k < len(want) && got[k] == want[k] {
				k++
			}
			lo := max(0, k-80)
			t.Errorf("%s: differs at byte %d:\ngot  …%s\nwant …%s", names[i], k, got[lo:min(len(got), k+40)], want[lo:min(len(want), k+40)])
		}
	}
}

// ring128 is the ring allgather at 128 ranks, the plan the codec
// benchmarks time (the same code reads and writes the 1 GB, 1024-rank
// plan).
func ring128(b *testing.B) *ir.Plan {
	path := "../algorithms/allgather_ring.msccl"
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	p, _, ds := compiler.CompileSource(path, src, map[string]int64{"ranks": 128}, compiler.Options{})
	if ds.HasErrors() {
		b.Fatal(ds)
	}
	return p
}

// BenchmarkDecode times Decode of ring128's JSON.
func BenchmarkDecode(b *testing.B) {
	data, err := ir.Encode(ring128(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, ds := ir.Decode(data); ds.HasErrors() {
			b.Fatal(ds)
		}
	}
}

// BenchmarkEncode compares Encode with the reflect-based encoder it
// replaced on ring128.
func BenchmarkEncode(b *testing.B) {
	p := ring128(b)
	for _, c := range []struct {
		name string
		enc  func(*ir.Plan) ([]byte, error)
	}{{"hand", ir.Encode}, {"reflect", ir.EncodeReflect}} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				out, err := c.enc(p)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.SetBytes(int64(n))
		})
	}
}
