package hostmem

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAvailable(t *testing.T) {
	dir := t.TempDir()
	meminfo = filepath.Join(dir, "meminfo")
	defer func() { meminfo = "/proc/meminfo" }()
	os.WriteFile(meminfo, []byte("MemTotal:       65536000 kB\nMemFree:  100 kB\nMemAvailable:   32768000 kB\n"), 0o644)
	if n, ok := Available(); !ok || n != 32768000<<10 {
		t.Fatalf("Available() = %d, %v", n, ok)
	}
	t.Setenv(Env, "")
	b, err := NewBudget(75)
	if err != nil || b.Bytes != 32768000<<10/100*75 || b.From != "75% of MemAvailable 31.2GiB" {
		t.Fatalf("NewBudget(75) = %+v, %v", b, err)
	}
	os.WriteFile(meminfo, []byte("MemTotal: 1 kB\n"), 0o644)
	if _, ok := Available(); ok {
		t.Fatal("Available without MemAvailable reported ok")
	}
	if b, _ := NewBudget(75); b.Bytes != Fallback {
		t.Fatalf("fallback budget %+v", b)
	}
}

func TestBudgetEnv(t *testing.T) {
	t.Setenv(Env, "1GiB")
	b, err := NewBudget(75)
	if err != nil || b.Bytes != 1<<30 {
		t.Fatalf("NewBudget with %s=1GiB: %+v, %v", Env, b, err)
	}
	err = b.Check("simulating p.json at 1GiB", 3<<29)
	want := "simulating p.json at 1GiB needs about 1.5GiB of host memory, more than 1GiB allowed ($MSCCL_HOST_MEMORY)"
	if err == nil || err.Error() != want {
		t.Fatalf("Check: %v\nwant %s", err, want)
	}
	if err := b.Check("x", 1<<30); err != nil {
		t.Fatalf("need equal to budget refused: %v", err)
	}
	t.Setenv(Env, "lots")
	if _, err := NewBudget(75); err == nil || !strings.Contains(err.Error(), "$MSCCL_HOST_MEMORY: invalid size \"lots\"") {
		t.Fatalf("bad %s: %v", Env, err)
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{
		100: "100 bytes", 1536: "1.5KiB", 48 << 20: "48MiB", 32768000 << 10: "31.2GiB", math.MaxInt64: "8EiB",
	} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestBudgetAddressLimit: under `ulimit -v` the budget is a share of the
// limit, not of the host's memory, so a run that would pass the limit is
// refused instead of killed.
func TestBudgetAddressLimit(t *testing.T) {
	t.Setenv(Env, "")
	old := addressLimit
	defer func() { addressLimit = old }()
	addressLimit = func() (int64, bool) { return 4 << 30, true }
	b, err := NewBudget(75)
	if err != nil || b.Bytes != (4<<30)/100*75 || b.From != "75% of the address-space limit (ulimit -v) 4GiB" {
		t.Fatalf("NewBudget(75) under a 4GiB limit = %+v, %v", b, err)
	}
	addressLimit = func() (int64, bool) { return 1 << 60, true }
	if b, _ := NewBudget(75); strings.Contains(b.From, "ulimit") {
		t.Fatalf("a limit above the memory available chose the limit: %+v", b)
	}
}
