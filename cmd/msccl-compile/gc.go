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

// proofGCPercent is the collector's target during the proof.
const proofGCPercent = 50

// proofGC lowers the collector's target for the proof, unless the user
// chose one with GOGC. Unlike the compile, the proof leaves garbage
// behind at every op (tokens, clock copies) while the plan stays live:
// at 400 the 512-rank ring's proof peaked at 12.2 GB and spent 24 s of
// system time faulting in fresh pages (6.5 GB and 5 s at 100); at 100
// the 1024-rank ring's heap reached twice its 4.4 GB live, 8.4 GB of
// RSS, and at 50 it stays at 7.5 GB for 4% more CPU (its two runs go
// one after the other, so the collector mostly takes the idle core).
func proofGC() {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	debug.SetGCPercent(proofGCPercent)
}
