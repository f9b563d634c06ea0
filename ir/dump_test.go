package ir

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files (testdata/broken/ir/*.want, ir/testdata/dump/*.want)")

func loadFixture(t testing.TB, f string) *Plan {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return decodeFixture(t, f, data)
}

// decodeFixture decodes the plan file f holds (data), which must decode
// cleanly.
func decodeFixture(t testing.TB, f string, data []byte) *Plan {
	t.Helper()
	p, ds := Decode(data)
	if ds.HasErrors() {
		t.Fatalf("%s: %s", f, ds)
	}
	return p
}

func TestDumpGolden(t *testing.T) {
	golden.Files(t, peerPlans, func(t *testing.T, f string, data []byte) {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		p := decodeFixture(t, f, data)
		got := Dump(p)
		if Dump(p) != got {
			t.Fatal("Dump is not deterministic")
		}
		golden.Check(t, filepath.Join("testdata", "dump", name+".want"), []byte(got), *update)
	})
}

func TestCloneIsDeep(t *testing.T) {
	golden.Files(t, peerPlans, func(t *testing.T, f string, data []byte) {
		p := decodeFixture(t, f, data)
		before := Dump(p)
		q := p.Clone()
		if !reflect.DeepEqual(p, q) {
			t.Fatal("clone differs from the original")
		}
		// Scribble over every int the clone holds; the original must not move.
		scribble(reflect.ValueOf(q).Elem())
		if reflect.DeepEqual(p, q) {
			t.Fatal("scribbling changed nothing; the test is broken")
		}
		if Dump(p) != before {
			t.Fatal("mutating the clone changed the original")
		}
	})
	if (*Plan)(nil).Clone() != nil {
		t.Error("nil.Clone() != nil")
	}
}

// scribble adds 1 to every int reachable from v.
func scribble(v reflect.Value) {
	// Op keeps its rarely used fields unexported; reach them too, or a
	// shallow clone of them would go unnoticed.
	eachScalar(v, func(reflect.StructField) bool { return true }, func(f reflect.Value) {
		if f.Kind() == reflect.Int {
			f.SetInt(f.Int() + 1)
		}
	})
}

// eachScalar calls visit on every int and uint8 that v holds, through
// pointers, slices and struct fields, unexported ones included where
// enter says so.
func eachScalar(v reflect.Value, enter func(reflect.StructField) bool, visit func(reflect.Value)) {
	switch v.Kind() {
	case reflect.Int, reflect.Uint8:
		visit(v)
	case reflect.Pointer:
		if !v.IsNil() {
			eachScalar(v.Elem(), enter, visit)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			eachScalar(v.Index(i), enter, visit)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if !f.CanSet() {
				if !enter(v.Type().Field(i)) {
					continue
				}
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			eachScalar(f, enter, visit)
		}
	}
}
