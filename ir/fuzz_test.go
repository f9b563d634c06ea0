package ir

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/internal/golden"
)

// FuzzDecode feeds arbitrary bytes through everything ir does with a plan
// file: decode, validate, dump, encode. None may panic; a plan that passes
// both checks must survive encode → decode unchanged.
func FuzzDecode(f *testing.F) {
	golden.Seed(f, peerPlans, "../testdata/broken/ir/*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, ds := Decode(data)
		if p == nil {
			if !ds.HasErrors() {
				t.Fatal("Decode returned no plan and no error")
			}
			return
		}
		if !ds.HasErrors() {
			ds = append(ds, Validate(p)...)
		} else {
			Validate(p)
		}
		Dump(p)
		out, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if ref, _ := encodeReflect(p); !bytes.Equal(out, ref) {
			t.Fatalf("Encode differs from the reflect-based encoder at byte %d", firstDiff(out, ref))
		}
		if ds.HasErrors() {
			return
		}
		q, ds2 := Decode(out)
		if ds2.HasErrors() {
			t.Fatalf("re-decoding a valid plan failed:\n%s", ds2)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatal("encode → decode changed a valid plan")
		}
	})
}

// TestMutatedFixturesNeverPanic edits random fields of every fixture, at
// the JSON level (values of the wrong kind, out of range, deleted keys,
// duplicated elements) and at the Go level (any int or enum of a decoded
// plan set to an arbitrary value), and runs decode, validate, dump, encode
// and clone on each result.
func TestMutatedFixturesNeverPanic(t *testing.T) {
	iters := 150
	if fulltest.Sample() {
		iters = 30
	}
	golden.Files(t, peerPlans, func(t *testing.T, f string, data []byte) {
		rng := rand.New(rand.NewPCG(1, uint64(len(data))))
		errs := 0
		for i := 0; i < iters; i++ {
			mut := mutateJSON(t, data, rng)
			p, ds := Decode(mut)
			if p != nil {
				ds = append(ds, Validate(p)...)
				Dump(p)
				if _, err := Encode(p); err != nil {
					t.Fatal(err)
				}
			}
			if ds.HasErrors() {
				errs++
			}
			base := decodeFixture(t, f, data)
			mutatePlan(reflect.ValueOf(base).Elem(), rng, 3)
			Validate(base)
			Dump(base)
			base.Clone()
		}
		// Most random edits break something; if none did, the mutator
		// is not reaching the plan.
		if errs < iters/4 {
			t.Errorf("only %d of %d JSON mutations drew an error", errs, iters)
		}
	})
}

var oddValues = []any{json.Number("-1"), json.Number("0"), json.Number("1"), json.Number("2"), json.Number("9"),
	json.Number("64"), json.Number("2147483648"), json.Number("1.5"), "x", "i", "port", "switch", "pipeline", nil, true,
	[]any{}, map[string]any{}}

// mutateJSON makes one random edit to the JSON document.
func mutateJSON(t *testing.T, data []byte, rng *rand.Rand) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		t.Fatal(err)
	}
	// Collect every (container, key) pair, then edit one.
	type slot struct {
		m   map[string]any
		key string
		a   []any
		idx int
	}
	var slots []slot
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				slots = append(slots, slot{m: v, key: k})
				walk(c)
			}
		case []any:
			for i, c := range v {
				slots = append(slots, slot{a: v, idx: i})
				walk(c)
			}
		}
	}
	walk(root)
	s := slots[rng.IntN(len(slots))]
	val := oddValues[rng.IntN(len(oddValues))]
	switch {
	case s.m != nil && rng.IntN(4) == 0:
		delete(s.m, s.key)
	case s.m != nil:
		s.m[s.key] = val
	case rng.IntN(3) == 0:
		// Duplicate a sibling in place: lengths stay, contents shift.
		s.a[s.idx] = s.a[rng.IntN(len(s.a))]
	default:
		s.a[s.idx] = val
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var oddInts = []int64{-1, 0, 1, 2, 7, 16, 64, 1 << 30, -1 << 31}

// mutatePlan sets n random ints or enums reachable from v to odd values.
func mutatePlan(v reflect.Value, rng *rand.Rand, n int) {
	var fields []reflect.Value
	// Op's unexported fields hold plan values too, except red: an index
	// into a table, not a value a plan can hold (odd reduce ops are kept
	// by name).
	eachScalar(v, func(f reflect.StructField) bool { return f.Name != "red" }, func(f reflect.Value) {
		fields = append(fields, f)
	})
	for ; n > 0 && len(fields) > 0; n-- {
		f := fields[rng.IntN(len(fields))]
		if f.Kind() == reflect.Uint8 {
			f.SetUint(uint64(rng.IntN(256)))
		} else {
			f.SetInt(oddInts[rng.IntN(len(oddInts))])
		}
	}
}

func BenchmarkDecodeValidate(b *testing.B) {
	files, _ := filepath.Glob("../testdata/peer-plans/*.json")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(f), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				p, ds := Decode(data)
				if ds.HasErrors() || Validate(p).HasErrors() {
					b.Fatal("fixture does not validate")
				}
			}
		})
	}
}
