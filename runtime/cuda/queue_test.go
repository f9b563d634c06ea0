package cuda

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestHardwareQueueSharing measures what the port proxy's design rests
// on: can a stream that is blocked (here by cuStreamWaitValue64 on a host
// flag, as a stream joined to a spinning kernel is) hold up a copy on
// another stream? The driver deals streams onto CUDA_DEVICE_MAX_CONNECTIONS
// hardware queues; two streams on one queue are ordered by it. The test
// blocks each of 64 later streams in turn and times a small copy on the
// first; it logs which streams held the copy up. It fails only on a
// driver error: what it reports is a property of the driver.
func TestHardwareQueueSharing(t *testing.T) {
	setup(t)
	if os.Getenv("MSCCL_PROBE_QUEUES") == "" {
		t.Skip("a probe of the driver: set MSCCL_PROBE_QUEUES=1")
	}
	flag := testHostMem(t, 8)
	word := flag.Word(0)
	p := testStream(t)
	var others []*Stream
	for range 64 {
		others = append(others, testStream(t))
	}
	a, b := testMalloc(t, 1<<20), testMalloc(t, 1<<20)
	ev, err := NewEvent(false)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Destroy()
	var blocked []string
	for k, s := range others {
		gen := uint64(k + 1)
		if err := s.WaitValue64(flag.Dev, gen); err != nil {
			t.Fatal(err)
		}
		// Something behind the wait on s, as a copy-out follows a join.
		if err := MemcpyAsync(a, b, 4096, s); err != nil {
			t.Fatal(err)
		}
		if err := MemcpyAsync(b, a, 1<<20, p); err != nil {
			t.Fatal(err)
		}
		if err := ev.Record(p); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(100 * time.Millisecond)
		done := false
		for time.Now().Before(deadline) {
			if ok, err := ev.Query(); err != nil {
				t.Fatal(err)
			} else if ok {
				done = true
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		atomic.StoreUint64(word, gen)
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if err := p.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if !done {
			blocked = append(blocked, strconv.Itoa(k+1))
		}
	}
	t.Logf("CUDA_DEVICE_MAX_CONNECTIONS=%q: a copy on stream 0 was held up by a wait on later stream(s) %v of 64", os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), blocked)
}
