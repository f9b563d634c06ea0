package cuda

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
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
	ev := testEvent(t, false)
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

// spinPTX: spin until the mapped host word *flag is non-zero.
const spinPTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 p_flag)
{
	.reg .pred %p1;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [p_flag];
	cvta.to.global.u64 %rd2, %rd1;
LOOP:
	ld.volatile.global.u64 %rd3, [%rd2];
	setp.eq.u64 %p1, %rd3, 0;
	@%p1 bra LOOP;
	ret;
}
`

// loadSpin loads spinPTX for the test and returns its kernel.
func loadSpin(t *testing.T) *Function {
	t.Helper()
	return loadKernel(t, spinPTX, "spin")
}

// TestCopyBehindSpinningKernel is the probe behind the port proxy's
// completion path: while a kernel spins on one stream (as a rank's kernel
// waits for a port signal), does a copy on another stream run, and does
// the host learn that it ran (cuStreamQuery, an event, or a marker word
// copied after it into mapped host memory)? "joined" adds what the
// executor puts around a kernel: an event recorded after it and waited on
// by a third stream. It logs what it saw within 300 ms; it fails only on a
// driver error.
func TestCopyBehindSpinningKernel(t *testing.T) {
	setup(t)
	if os.Getenv("MSCCL_PROBE_QUEUES") == "" {
		t.Skip("a probe of the driver: set MSCCL_PROBE_QUEUES=1")
	}
	spin := loadSpin(t)
	for _, joined := range []bool{false, true} {
		flag := testHostMem(t, 8)
		marker := testHostMem(t, 8)
		k, p, c := testStream(t), testStream(t), testStream(t)
		src, dst, one := testMalloc(t, 1<<20), testMalloc(t, 1<<20), testMalloc(t, 8)
		if err := Memset8(one, 0xab, 8); err != nil {
			t.Fatal(err)
		}
		arg := uint64(flag.Dev)
		if err := spin.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, k, unsafe.Pointer(&arg)); err != nil {
			t.Fatal(err)
		}
		if joined {
			ev := testEvent(t, false)
			if err := ev.Record(k); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitEvent(ev); err != nil {
				t.Fatal(err)
			}
			if err := MemcpyAsync(dst, src, 4096, c); err != nil {
				t.Fatal(err)
			}
		}
		if err := MemcpyAsync(dst, src, 1<<20, p); err != nil {
			t.Fatal(err)
		}
		if err := MemcpyAsync(marker.Dev, one, 8, p); err != nil {
			t.Fatal(err)
		}
		pe := testEvent(t, false)
		if err := pe.Record(p); err != nil {
			t.Fatal(err)
		}
		var landed, queried, evDone bool
		for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline) && !(landed && queried && evDone); {
			landed = landed || atomic.LoadUint64(marker.Word(0)) != 0
			if ok, err := p.Query(); err != nil {
				t.Fatal(err)
			} else {
				queried = queried || ok
			}
			if ok, err := pe.Query(); err != nil {
				t.Fatal(err)
			} else {
				evDone = evDone || ok
			}
			time.Sleep(50 * time.Microsecond)
		}
		atomic.StoreUint64(flag.Word(0), 1)
		for _, s := range []*Stream{k, p, c} {
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("CUDA_DEVICE_MAX_CONNECTIONS=%q joined=%v, while a kernel spins: marker copied after the copy landed=%v, cuStreamQuery done=%v, event done=%v",
			os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), joined, landed, queried, evDone)
	}
}
