//go:build unix

package hostmem

import "syscall"

// addressLimit is the process's address-space limit (RLIMIT_AS, what
// `ulimit -v` sets) in bytes; false when there is none. A Go process
// past it dies with "fatal error: out of memory" rather than return an
// error, so the budget must stay under it. A variable for tests.
var addressLimit = func() (int64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur == ^uint64(0) || r.Cur > 1<<62 {
		return 0, false
	}
	return int64(r.Cur), true
}
