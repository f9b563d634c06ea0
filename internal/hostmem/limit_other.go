//go:build !unix

package hostmem

// addressLimit: no RLIMIT_AS here.
var addressLimit = func() (int64, bool) { return 0, false }
