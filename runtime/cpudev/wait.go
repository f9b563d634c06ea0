package cpudev

import (
	"context"
	"runtime"
	"syscall"
	"time"
)

// Backoff paces a thread that polls words of shared memory which other
// processes write (a peer's signal, an LL packet's flag), between one
// poll that found nothing and the next. It never parks the goroutine in
// the Go scheduler. A poll's caller may be a C thread that called into
// Go (libmsccl_nccl.so), whose goroutine is locked to that thread, and
// every park and wake-up of such a goroutine is a hand-off between OS
// threads (futex wake, then sleep) costing tens to hundreds of µs on a
// busy machine, more than a whole small collective; runtime.Gosched is
// such a hand-off for a locked goroutine too. So the yields and sleeps
// here are the kernel's, and a goroutine that is not Locked also calls
// runtime.Gosched now and then (goschedEvery), to let the goroutines it
// may be waiting for (another rank of this process, a port proxy) have
// its P.
//
// The phases: a few polls back to back (a peer that is running answers
// within a µs or so); then one sched_yield per poll for yieldFor, which
// gives this core to any thread waiting for it (on a machine with fewer
// cores than ranks, that is the peer being waited for) and costs well
// under a µs when no thread is; then nanosleep, 10 µs longer each time
// up to maxSleep, so a rank that waits long (a slow peer, a debugger)
// stops burning its core. The sleep blocks the OS thread in the kernel,
// which wakes it without the Go scheduler; the runtime takes the
// thread's P for other goroutines if they need it.
//
// The zero value is ready; Reset starts the phases over after a poll
// that found what it waited for.
type Backoff struct {
	// Locked: the polling goroutine is locked to its OS thread
	// (LockedThread), so it never calls runtime.Gosched.
	Locked bool
	polls  int
	since  time.Time // the first yield
	sleep  time.Duration
}

// The phases' lengths. spinPolls is small because polls are cheap but a
// peer that is not running needs this core; yieldFor is several times a
// wake-up from sleep, so a peer that answers within it never meets the
// sleeps' latency.
const (
	spinPolls = 64
	yieldFor  = 500 * time.Microsecond
	maxSleep  = time.Millisecond
	sleepStep = 10 * time.Microsecond
)

// Pause waits before the next poll, as long as the phase says.
func (b *Backoff) Pause() {
	b.polls++
	switch {
	case b.polls <= spinPolls:
		return
	case b.polls == spinPolls+1:
		b.since = time.Now()
	}
	yielding := b.sleep == 0 && time.Since(b.since) < yieldFor
	if !b.Locked && (!yielding || (b.polls-spinPolls)%goschedEvery == 1) {
		runtime.Gosched()
	}
	if yielding {
		yield()
		return
	}
	b.sleep = min(b.sleep+sleepStep, maxSleep)
	sleep(b.sleep)
}

// goschedEvery is how many yielding pauses of a Backoff that is not
// Locked pass between its runtime.Gosched calls (the first yielding
// pause has one, and so has every sleep). Each Gosched wakes an idle
// thread of the runtime to look for work while a P is idle: a thread
// woken for nothing, on a machine whose cores the ranks need.
const goschedEvery = 16

// Reset starts the phases over: the next wait begins with spinning.
func (b *Backoff) Reset() { *b = Backoff{Locked: b.Locked} }

// sleeping reports whether the backoff has reached its sleeping phase.
func (b *Backoff) sleeping() bool { return b.sleep > 0 }

// yield gives the calling thread's core to another runnable thread, if
// any, without parking the goroutine (sched_yield).
func yield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// sleep blocks the calling thread for d in the kernel (nanosleep), not
// in the Go scheduler. An interrupted sleep is not resumed: the caller
// polls again, which is all a wake-up is for.
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Nanosleep(&ts, nil)
}

// lockedKey marks a context (WithLockedThread).
type lockedKey struct{}

// WithLockedThread marks ctx as the context of a call whose goroutine is
// locked to its OS thread, as every call from C into Go is: the waits of
// the call then poll with a Locked Backoff. The mark is a promise the
// caller makes; a goroutine that is not locked but carries it only
// loses runtime.Gosched's pauses.
func WithLockedThread(ctx context.Context) context.Context {
	return context.WithValue(ctx, lockedKey{}, true)
}

// LockedThread reports whether ctx carries WithLockedThread's mark.
func LockedThread(ctx context.Context) bool {
	v, _ := ctx.Value(lockedKey{}).(bool)
	return v
}
