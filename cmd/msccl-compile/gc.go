package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is the collector's target while the command runs. A large
// compile (5.8 million plan ops for a 1024-rank ring allgather) builds a
// heap of about a gigabyte that stays alive until the plan is written:
// almost nothing it allocates is garbage, so at the default of 100 the
// collector marks the growing heap about ten times for little gain
// (about 0.5 s of a 2-core machine). 400 trades that for a larger peak
// only where there is garbage to leave behind.
const gcPercent = 400

// tuneGC raises the collector's target unless the user chose one with
// GOGC. Only main calls it: the command owns its process, whereas the
// compiler package is a library and must leave the setting alone.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	debug.SetGCPercent(gcPercent)
}
