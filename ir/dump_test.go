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
	p, ds := Decode(data)
	if ds.HasErrors() {
		t.Fatalf("%s: %s", f, ds)
	}
	return p
}

func TestDumpGolden(t *testing.T) {
	for _, f := range fixtures(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			p := loadFixture(t, f)
			got := Dump(p)
			if Dump(p) != got {
				t.Fatal("Dump is not deterministic")
			}
			golden.Check(t, filepath.Join("testdata", "dump", name+".want"), []byte(got), *update)
		})
	}
}

func TestCloneIsDeep(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p := loadFixture(t, f)
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
	}
	if (*Plan)(nil).Clone() != nil {
		t.Error("nil.Clone() != nil")
	}
}

// scribble adds 1 to every int reachable from v.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Int:
		v.SetInt(v.Int() + 1)
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			scribble(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if !f.CanSet() {
				// Op keeps its rarely used fields unexported; reach them
				// too, or a shallow clone of them would go unnoticed.
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			scribble(f)
		}
	}
}
