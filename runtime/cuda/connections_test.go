package cuda

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// arrivePTX: set this kernel's word of slots (n u64 in mapped host
// memory) to 1, then spin until every word is 1 or *release is non-zero:
// a barrier of n kernels, one per stream, that ends only if all of them
// run at once.
const arrivePTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry arrive(.param .u64 p_slots, .param .u64 p_release, .param .u32 p_idx, .param .u32 p_n)
{
	.reg .pred %p<3>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<10>;
	ld.param.u64 %rd1, [p_slots];
	ld.param.u64 %rd2, [p_release];
	ld.param.u32 %r1, [p_idx];
	ld.param.u32 %r2, [p_n];
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mul.wide.u32 %rd5, %r1, 8;
	add.u64 %rd5, %rd3, %rd5;
	mov.u64 %rd6, 1;
	st.volatile.global.u64 [%rd5], %rd6;
LOOP:
	ld.volatile.global.u64 %rd7, [%rd4];
	setp.ne.u64 %p1, %rd7, 0;
	@%p1 bra DONE;
	mov.u32 %r3, 0;
	mov.u64 %rd8, 0;
	mov.u64 %rd9, %rd3;
SUM:
	ld.volatile.global.u64 %rd7, [%rd9];
	add.u64 %rd8, %rd8, %rd7;
	add.u64 %rd9, %rd9, 8;
	add.u32 %r3, %r3, 1;
	setp.lt.u32 %p2, %r3, %r2;
	@%p2 bra SUM;
	cvt.u32.u64 %r4, %rd8;
	setp.lt.u32 %p2, %r4, %r2;
	@%p2 bra LOOP;
DONE:
	ret;
}
`

// TestKernelsOnManyStreamsRunTogether records how many streams of one
// context can each hold a kernel that waits for the others' kernels,
// with a second kernel queued behind each (as in-process ranks enqueue
// collectives back to back on their streams): streams beyond the
// context's hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 unless
// set) share one, and a kernel queued behind a waiting kernel of its
// queue may not start, a deadlock between ranks that only a watchdog
// ends. For k streams it launches two barrier kernels on each, stream by
// stream, and logs whether every kernel ran or how many started within
// 2 s (then the host releases them). It fails only on a driver error or
// a kernel still running 10 s after the release.
func TestKernelsOnManyStreamsRunTogether(t *testing.T) {
	setup(t)
	arrive := loadArrive(t)
	t.Logf("CUDA_DEVICE_MAX_CONNECTIONS=%q", os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
	for _, k := range []int{4, 8, 9, 12, 16, 32, 33} {
		note := fmt.Sprintf("%d streams, 2 waiting kernels queued on each: ", k)
		if a, b, ok := arriveTwice(t, arrive, k, false); ok {
			t.Log(note + "all ran")
		} else {
			t.Logf("%sSTUCK: after 2 s %d of %d first kernels and %d of %d second ones had started (streams share hardware queues)", note, a, k, b, k)
		}
	}
}

// TestLaunchRoundsOnSharedQueues is what executor/cuda's in-process ranks
// rely on (rankrounds.go): the same barrier kernels, two per stream, but
// queued in rounds (the first kernel on every stream, then the second on
// every stream), as the ranks of one process now launch. Then no
// stream's first kernel is queued behind another's second, and all of
// them run however many streams share a hardware queue. It fails if any
// count of streams is stuck; under CUDA_DEVICE_MAX_CONNECTIONS=1 (one
// queue for every stream) it must pass too.
func TestLaunchRoundsOnSharedQueues(t *testing.T) {
	setup(t)
	arrive := loadArrive(t)
	for _, k := range []int{4, 8, 9, 12, 16, 32, 33} {
		if a, b, ok := arriveTwice(t, arrive, k, true); !ok {
			t.Errorf("CUDA_DEVICE_MAX_CONNECTIONS=%q, %d streams, two barrier kernels queued on each in rounds: STUCK: after 2 s %d of %d first kernels and %d of %d second ones had started",
				os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), k, a, k, b, k)
		}
	}
}

func loadArrive(t *testing.T) *Function {
	t.Helper()
	return loadKernel(t, arrivePTX, "arrive")
}

// arriveTwice makes k streams and queues two barrier kernels on each:
// stream by stream, or in rounds (every stream's first, then every
// stream's second). It reports whether all ran within 2 s, else how
// many first and second kernels had started (then the host releases
// them). It fails the test only on a driver error or a kernel still
// running 10 s after the release.
func arriveTwice(t *testing.T, arrive *Function, k int, rounds bool) (first, second int, ok bool) {
	t.Helper()
	streams := make([]*Stream, k)
	for i := range streams {
		streams[i] = testStream(t)
	}
	slots := [2]*HostMem{testHostMem(t, int64(8*k)), testHostMem(t, int64(8*k))}
	rel := testHostMem(t, 8)
	clear(slots[0].Bytes)
	clear(slots[1].Bytes)
	clear(rel.Bytes)
	relDev := uint64(rel.Dev)
	n := uint32(k)
	launch := func(i int, sl *HostMem) {
		idx := uint32(i)
		sd := uint64(sl.Dev)
		if err := arrive.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, streams[i], unsafe.Pointer(&sd), unsafe.Pointer(&relDev), unsafe.Pointer(&idx), unsafe.Pointer(&n)); err != nil {
			atomic.StoreUint64(rel.Word(0), 1)
			t.Fatal(err)
		}
	}
	if rounds {
		for _, sl := range slots {
			for i := range streams {
				launch(i, sl)
			}
		}
	} else {
		for i := range streams {
			for _, sl := range slots {
				launch(i, sl)
			}
		}
	}
	arrived := func(h *HostMem) int {
		c := 0
		for i := 0; i < k; i++ {
			if atomic.LoadUint64(h.Word(int64(8*i))) != 0 {
				c++
			}
		}
		return c
	}
	done := func() bool {
		for _, s := range streams {
			if ok, err := s.Query(); err != nil {
				t.Fatal(err)
			} else if !ok {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if done() {
		return k, k, true
	}
	first, second = arrived(slots[0]), arrived(slots[1])
	atomic.StoreUint64(rel.Word(0), 1)
	end := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(end) {
			t.Fatalf("%d streams: kernels still running 10 s after the release", k)
		}
		time.Sleep(time.Millisecond)
	}
	return first, second, false
}
