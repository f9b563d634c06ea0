// Package par runs independent per-rank work on several cores. Compiler
// passes and plan validation use it once a plan is large enough: each rank
// reads shared tables and writes only its own slots, and callers merge
// results in rank order, so output never depends on the workers' schedule.
//
// par owns no plan knowledge; it must not import anything of this module.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers is how many workers a pass over n ranks uses: one for small
// plans, where starting goroutines costs more than it saves.
func Workers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n/16))
}

// ForEach calls f(w, i) for every i in [0, n) on workers w in
// [0, workers). A panic in a worker is re-raised in the caller, as if the
// items had been processed in turn (the compiler turns it into an
// internal-error diagnostic).
func ForEach(workers, n int, f func(w, i int)) {
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var failure any
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					once.Do(func() { failure = p })
					next.Store(int64(n)) // the others stop at their next item
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(w, i)
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
}
