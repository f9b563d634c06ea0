package ir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// zeros is an endless stream, a reader's worst case: without a cap it is
// read until memory runs out.
type zeros struct{ read int64 }

func (z *zeros) Read(b []byte) (int, error) {
	clear(b)
	z.read += int64(len(b))
	return len(b), nil
}

// TestPlanBytesCap checks that every reader refuses a plan above its cap
// before decoding: a regular file by its size, without reading it; a
// stream (a pipe, /dev/zero) once it has read one byte past the cap.
func TestPlanBytesCap(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 1 TiB on paper, no blocks on disk. Reading it whole would
	// take the machine's memory.
	if err := f.Truncate(1 << 40); err != nil {
		t.Skip("no sparse files here:", err)
	}
	f.Close()
	var tl *PlanTooLargeError
	if _, err := ReadPlanFile(big, 0); !errors.As(err, &tl) || tl.Size != 1<<40 || tl.Max != DefaultMaxPlanBytes {
		t.Fatalf("1 TiB plan file: got %v, want a PlanTooLargeError at the default cap", err)
	}
	if _, _, err := LoadFile(big); !errors.As(err, &tl) {
		t.Fatalf("LoadFile of 1 TiB: got %v", err)
	}
	z := &zeros{}
	if _, err := ReadPlan(z, "stdin", 1<<20); !errors.As(err, &tl) || tl.Size != -1 || !strings.Contains(err.Error(), "stdin holds more than 1MiB") {
		t.Fatalf("endless stream: got %v", err)
	}
	if z.read > 2<<20 {
		t.Errorf("read %d bytes of an endless stream under a 1MiB cap", z.read)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := ReadPlanFile("/dev/zero", 1<<20); !errors.As(err, &tl) {
			t.Errorf("/dev/zero: got %v", err)
		}
	}
	plan := []byte(`{"name":"x"}`)
	if _, _, err := LoadLimit(plan, 4); !errors.As(err, &tl) || tl.Size != int64(len(plan)) {
		t.Errorf("LoadLimit over the cap: got %v", err)
	}
	if _, err := ReadPlan(strings.NewReader(string(plan)), "p", int64(len(plan))); err != nil {
		t.Errorf("a plan exactly at the cap: %v", err)
	}
}

// TestValidateRankCap checks that a plan with more gpus than MaxRanks is
// refused with one diagnostic, before per-gpu work.
func TestValidateRankCap(t *testing.T) {
	p := &Plan{GPUs: make([]GPU, MaxRanks+1)}
	ds := Validate(p)
	if len(ds) != 1 || !ds.HasErrors() || ds[0].Path != "gpus" || !strings.Contains(ds[0].Summary, "16385 gpus") {
		t.Fatalf("got %v", ds)
	}
}
