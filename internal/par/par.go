// Package par runs independent per-rank work on several cores. Compiler
// passes and plan validation use it once a plan is large enough: each rank
// reads shared tables and writes only its own slots, and callers merge
// results in rank order, so output never depends on the workers' schedule.
//
// par owns no plan knowledge; it must not import anything of this module.
package par

import (
	"fmt"
	"runtime"
	"runtime/debug"
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

// Each runs f(i) for every i in [0, n), each on a goroutine of its own,
// and returns their errors by i once all have returned. Unlike ForEach's
// workers, the calls may wait on each other (the ranks of one job in one
// process, the blocks of one rank), so none may wait for a free worker.
func Each(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// PanicError is a panic that Try caught: the value and the stack where it
// was raised.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Try calls f and returns its error, or the panic f raised as a
// *PanicError. Work run inside a host process that must not crash (the
// proof under the Python module or libmsccl) uses it so a bug of ours
// becomes an error the caller reports.
func Try(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return f()
}
