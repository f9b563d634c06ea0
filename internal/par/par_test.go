package par

import (
	"fmt"
	"strings"
	"sync"
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

// Each's calls run at once: every call waits until all n have started,
// which only goroutines of their own can do; errors come back by index.
func TestEachRunsTogether(t *testing.T) {
	const n = 33
	var started sync.WaitGroup
	started.Add(n)
	errs := Each(n, func(i int) error {
		started.Done()
		started.Wait()
		if i%2 == 1 {
			return fmt.Errorf("odd %d", i)
		}
		return nil
	})
	for i, err := range errs {
		if (err != nil) != (i%2 == 1) || err != nil && err.Error() != fmt.Sprintf("odd %d", i) {
			t.Errorf("errs[%d] = %v", i, err)
		}
	}
	if len(Each(0, nil)) != 0 {
		t.Error("Each(0) returned errors")
	}
}

// Try turns a panic into a *PanicError carrying the value and the stack,
// and passes an ordinary error through.
func TestTry(t *testing.T) {
	err := Try(func() error { panic("boom") })
	pe, ok := err.(*PanicError)
	if !ok || pe.Value != "boom" || err.Error() != "panic: boom" || !strings.Contains(string(pe.Stack), "TestTry") {
		t.Errorf("Try(panic) = %v (%T)", err, err)
	}
	want := fmt.Errorf("plain")
	if err := Try(func() error { return want }); err != want {
		t.Errorf("Try(error) = %v", err)
	}
	if err := Try(func() error { return nil }); err != nil {
		t.Errorf("Try(nil) = %v", err)
	}
}
