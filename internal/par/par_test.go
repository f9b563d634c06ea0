package par

import (
	"sync/atomic"
	"testing"
)

func TestForEachVisitsEveryItemOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 7} {
		seen := make([]atomic.Int32, 1000)
		ForEach(workers, len(seen), func(w, i int) {
			if w < 0 || w >= max(workers, 1) {
				t.Errorf("worker %d out of range", w)
			}
			seen[i].Add(1)
		})
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("workers=%d: item %d visited %d times", workers, i, n)
			}
		}
	}
}

func TestForEachPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want the worker's panic", r)
		}
	}()
	ForEach(2, 100, func(_, i int) {
		if i == 37 {
			panic("boom")
		}
	})
	t.Error("no panic")
}
