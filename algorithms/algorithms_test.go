package algorithms

import (
	"os"
	"path/filepath"
	"testing"
)

// The embedded library is the folder's: every .msccl file is in it, and
// the selection table compiles from it for a world.
func TestEmbeddedMatchesFolder(t *testing.T) {
	disk, _ := filepath.Glob("*.msccl")
	if len(disk) == 0 || len(disk) != len(Names()) {
		t.Fatalf("%d programs on disk, %d embedded", len(disk), len(Names()))
	}
	for _, n := range Names() {
		a, _ := os.ReadFile(n + ".msccl")
		b, err := Source(n)
		if err != nil || string(a) != string(b) {
			t.Errorf("%s: embedded copy differs (%v)", n, err)
		}
	}
	plans, err := Plans(map[string]int64{"ranks": 8})
	if err != nil || len(plans) == 0 {
		t.Fatalf("plans for 8 ranks: %d, %v", len(plans), err)
	}
}
