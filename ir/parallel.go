package ir

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Validate checks each rank against read-only tables of all ranks, so
// ranks can go to separate cores. Each rank writes only its own slots,
// and diagnostics are joined in rank order, so the report is the same
// whatever the schedule of the workers. (compiler/parallel.go is the
// same helper; ir cannot import it.)

// rankWorkers is how many workers a pass over n ranks uses: one for small
// plans, where starting goroutines costs more than it saves.
func rankWorkers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n/16))
}

// forRanks calls f(w, r) for every rank r in [0, n) on workers
// w in [0, workers). A panic in a worker is re-raised in the caller, as if the
// ranks had been checked in turn.
func forRanks(workers, n int, f func(w, r int)) {
	if workers <= 1 {
		for r := 0; r < n; r++ {
			f(0, r)
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
					next.Store(int64(n)) // the others stop at their next rank
				}
			}()
			for {
				r := int(next.Add(1) - 1)
				if r >= n {
					return
				}
				f(w, r)
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
}
