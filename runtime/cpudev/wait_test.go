package cpudev

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// The backoff spins, yields for yieldFor, then sleeps longer each pause
// up to maxSleep; Reset starts over with spinning.
func TestBackoffPhases(t *testing.T) {
	var b Backoff
	start := time.Now()
	for range spinPolls + 1 {
		b.Pause()
	}
	if b.sleeping() {
		t.Fatal("sleeping after the spin polls")
	}
	for !b.sleeping() {
		b.Pause()
	}
	if d := time.Since(start); d < yieldFor {
		t.Errorf("slept after yielding for %v, want %v first", d, yieldFor)
	}
	t0 := time.Now()
	b.Pause() // the second sleep: 2 steps
	if d := time.Since(t0); d < 2*sleepStep {
		t.Errorf("a sleeping pause took %v, want at least %v", d, 2*sleepStep)
	}
	b.sleep = maxSleep // where many sleeps lead, without the waiting
	t0 = time.Now()
	b.Pause()
	if d := time.Since(t0); b.sleep != maxSleep || d < maxSleep {
		t.Errorf("capped sleep %v took %v, want %v", b.sleep, d, maxSleep)
	}
	b.Reset()
	t0 = time.Now()
	for range spinPolls {
		b.Pause()
	}
	if b.sleeping() || time.Since(t0) > 50*time.Millisecond {
		t.Errorf("after Reset: sleeping %v, %v for the spin polls", b.sleeping(), time.Since(t0))
	}
}

// A Backoff that is not Locked lets the other goroutines of its P run
// from its first pause after the spin polls (with one P, the goroutine
// it waits for could run no other way until preempted).
func TestBackoffUnlockedSharesItsP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomic.Bool
	go ran.Store(true)
	var b Backoff
	for range spinPolls + 1 {
		b.Pause()
	}
	if !ran.Load() {
		t.Error("the other goroutine did not run during the first yielding pause")
	}
}

func TestLockedThreadMark(t *testing.T) {
	ctx := context.Background()
	if LockedThread(ctx) || !LockedThread(WithLockedThread(ctx)) {
		t.Error("LockedThread does not read WithLockedThread's mark")
	}
}
