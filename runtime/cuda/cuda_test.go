package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// add1PTX: data[i] += 1 for i < n; thread 0 of block 0 also counts the
// launch in the module global "launches".
const add1PTX = `.version 7.0
.target sm_70
.address_size 64
.visible .global .align 8 .u64 launches;
.visible .entry add1(.param .u64 p_data, .param .u32 p_n)
{
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [p_data];
	ld.param.u32 %r1, [p_n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ne.u32 %p2, %r5, 0;
	@%p2 bra BODY;
	atom.global.add.u64 %rd5, [launches], 1;
BODY:
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.volatile.global.u32 %r6, [%rd4];
	add.s32 %r7, %r6, 1;
	st.volatile.global.u32 [%rd4], %r7;
DONE:
	ret;
}
`

// setup skips without a driver, else makes device 0's primary context
// current on a locked thread for the rest of the test.
func setup(t testing.TB) *Context {
	t.Helper()
	if err := Init(); err != nil {
		if errors.Is(err, ErrNoDriver) {
			t.Skipf("no CUDA: %v", err)
		}
		t.Fatal(err)
	}
	n, err := DeviceCount()
	if err != nil || n == 0 {
		t.Skipf("no CUDA device (count %d, %v)", n, err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	ctx, err := Device(0).PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Release() })
	if err := ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// testMalloc, testStream and testHostMem allocate for a test (after
// setup), failing it on error and freeing at its end.
func testMalloc(t testing.TB, n int64) DevicePtr {
	t.Helper()
	return owned(t, Free)(Malloc(n))
}

func testStream(t testing.TB) *Stream {
	t.Helper()
	return owned(t, (*Stream).Destroy)(NewStream(true))
}

func testEvent(t testing.TB, timing bool) *Event {
	t.Helper()
	return owned(t, (*Event).Destroy)(NewEvent(timing))
}

func testHostMem(t testing.TB, n int64) *HostMem {
	t.Helper()
	return owned(t, (*HostMem).Free)(HostAllocMapped(n))
}

// readDevice copies n bytes of device memory at p to the host, failing t
// on error.
func readDevice(t testing.TB, p DevicePtr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := MemcpyDtoH(b, p); err != nil {
		t.Fatal(err)
	}
	return b
}

// owned takes what a constructor returned, fails t on its error and
// releases the value when the test ends: the shape of every test*
// helper above, written once (used as owned(t, Free)(Malloc(n))).
func owned[T any](t testing.TB, release func(T) error) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { release(v) })
		return v
	}
}

// loadKernel loads one of the tests' PTX modules for the test (unloaded
// when it ends) and returns its kernel name; f.mod is the module.
func loadKernel(t testing.TB, ptx, name string) *Function {
	t.Helper()
	m := owned(t, (*Module).Unload)(LoadModule([]byte(ptx)))
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func loadAdd1(t testing.TB) (*Module, *Function) {
	t.Helper()
	f := loadKernel(t, add1PTX, "add1")
	return f.mod, f
}

func u32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func TestErrorNames(t *testing.T) {
	for _, tc := range []struct {
		code int
		name string
	}{
		{ErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
		{ErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
		{ErrorNoDevice, "CUDA_ERROR_NO_DEVICE"},
		{ErrorNotReady, "CUDA_ERROR_NOT_READY"},
		{ErrorPeerAccessEnabled, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
		{CodeMissingSymbol, "MSCCL_CUDA_SYMBOL_MISSING"},
	} {
		if got := ErrorName(tc.code); got != tc.name {
			t.Errorf("ErrorName(%d) = %q, want %q", tc.code, got, tc.name)
		}
	}
	e := &Error{Call: "cuMemAlloc", Code: ErrorOutOfMemory, Name: ErrorName(ErrorOutOfMemory)}
	if !strings.Contains(e.Error(), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY") {
		t.Errorf("Error() = %q", e.Error())
	}
	if !errors.Is(&Error{Code: ErrorNoDevice}, ErrNoDriver) {
		t.Error("NO_DEVICE does not wrap ErrNoDriver")
	}
	if !IsCode(e, ErrorOutOfMemory) {
		t.Error("IsCode failed")
	}
}

// TestBadInput runs with or without a driver: every call must fail with an
// error, never panic.
func TestBadInput(t *testing.T) {
	var nilStream *Stream
	var nilEvent *Event
	var nilMod *Module
	var nilFn *Function
	var nilCtx *Context
	one := [3]uint32{1, 1, 1}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Malloc(0)", func() error { _, err := Malloc(0); return err }},
		{"Malloc(-1)", func() error { _, err := Malloc(-1); return err }},
		{"HostAllocMapped(0)", func() error { _, err := HostAllocMapped(0); return err }},
		{"MemcpyDtoD(-1)", func() error { return MemcpyDtoD(0, 0, -1) }},
		{"Memset8(-1)", func() error { return Memset8(0, 0, -1) }},
		{"MemcpyHtoDAsync(nil)", func() error { return MemcpyHtoDAsync(0, nil, 8, nil) }},
		{"LoadModule(empty)", func() error { _, err := LoadModule(nil); return err }},
		{"nil module Function", func() error { _, err := nilMod.Function("x"); return err }},
		{"nil function Launch", func() error { return nilFn.Launch(one, one, 0, nil) }},
		{"nil stream Destroy", func() error { return nilStream.Destroy() }},
		{"nil stream BeginCapture", func() error { return nilStream.BeginCapture() }},
		{"nil event Record", func() error { return nilEvent.Record(nil) }},
		{"Elapsed(nil)", func() error { _, err := Elapsed(nil, nil); return err }},
		{"nil graph Instantiate", func() error { _, err := (*Graph)(nil).Instantiate(); return err }},
		{"nil exec Launch", func() error { return (*GraphExec)(nil).Launch(nil) }},
		{"nil context SetCurrent", func() error { return nilCtx.SetCurrent() }},
		{"nil context EnablePeerAccess", func() error { return nilCtx.EnablePeerAccess(nil) }},
		{"nil context Do", func() error { return nilCtx.Do(func() error { return nil }) }},
		{"nil HostMem Free", func() error { return (*HostMem)(nil).Free() }},
		{"unaligned WriteValue64", func() error { return nilStream.WriteValue64(3, 1) }},
		{"device out of range", func() error { _, err := Device(1 << 20).Name(); return err }},
	} {
		if err := tc.call(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestDevice(t *testing.T) {
	setup(t)
	v, err := DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	name, err := Device(0).Name()
	if err != nil {
		t.Fatal(err)
	}
	major, minor, err := Device(0).ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	sms, err := Device(0).Attribute(AttrMultiprocessorCount)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver %d, %s, sm_%d%d, %d SMs, cuStreamWriteValue64_v2=%v", v, name, major, minor, sms,
		HasSymbol("cuStreamWriteValue64_v2"))
	if name == "" || major < 3 || sms <= 0 {
		t.Errorf("implausible device: %q sm_%d%d %d SMs", name, major, minor, sms)
	}
}

func TestMemoryRoundTrip(t *testing.T) {
	setup(t)
	for _, n := range []int{1, 4096, 1<<20 + 3} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		a, err := Malloc(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Malloc(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		steps := []error{MemcpyHtoD(a, src), MemcpyDtoD(b, a, int64(n)), MemcpyDtoH(got, b)}
		for _, err := range steps {
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, src) {
			t.Errorf("n=%d: round trip differs", n)
		}
		if err := Memset8(b, 0xab, int64(n)); err != nil {
			t.Fatal(err)
		}
		if err := MemcpyDtoH(got, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{0xab}, n)) {
			t.Errorf("n=%d: memset differs", n)
		}
		if err := Free(a); err != nil {
			t.Fatal(err)
		}
		if err := Free(b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStreamsAndEvents(t *testing.T) {
	setup(t)
	const n = 64 << 20
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b := testMalloc(t, n), testMalloc(t, n)
	s1 := testStream(t)
	s2, err := NewStream(false)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Destroy()
	start, end := testEvent(t, true), testEvent(t, true)
	c, err := Malloc(8)
	must(err)
	defer Free(c)
	must(Memset8(a, 0x5a, n))
	must(Memset8(b, 0, n))
	must(Memset8(c, 0, 8))
	must(start.Record(s1))
	must(MemcpyAsync(b, a, n, s1))
	must(end.Record(s1))
	// s2 reads the end of b only after s1's copy: WaitEvent orders them.
	must(s2.WaitEvent(end))
	must(MemcpyAsync(c, b+n-8, 8, s2))
	must(s2.Synchronize())
	must(end.Synchronize())
	done, err := s1.Query()
	must(err)
	if !done {
		t.Error("Query after the event completed says not done")
	}
	ms, err := Elapsed(start, end)
	must(err)
	if ms <= 0 {
		t.Errorf("elapsed %v ms", ms)
	}
	t.Logf("64 MiB device copy: %.3f ms, %.0f GB/s", ms, 2*float64(n)/float64(ms)/1e6)
	got := make([]byte, 8)
	must(MemcpyDtoH(got, c))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x5a}, 8)) {
		t.Errorf("copy ordered by WaitEvent saw %x", got)
	}
}

func TestKernelLaunch(t *testing.T) {
	setup(t)
	m, f := loadAdd1(t)
	const n = 1000
	p := testMalloc(t, 4*n)
	if err := Memset8(p, 0, 4*n); err != nil {
		t.Fatal(err)
	}
	s := testStream(t)
	arg, cnt := uint64(p), uint32(n)
	for i := 0; i < 3; i++ {
		if err := f.Launch([3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s,
			unsafe.Pointer(&arg), unsafe.Pointer(&cnt)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := readDevice(t, p, 4*n)
	for i, v := range u32s(out) {
		if v != 3 {
			t.Fatalf("data[%d] = %d, want 3", i, v)
		}
	}
	g, size, err := m.Global("launches")
	if err != nil {
		t.Fatal(err)
	}
	cb := readDevice(t, g, int(size))
	if size != 8 || binary.LittleEndian.Uint64(cb) != 3 {
		t.Errorf("launches global: size %d value %d", size, binary.LittleEndian.Uint64(cb))
	}
	if err := f.SetMaxDynamicSharedMemory(64 << 10); err != nil {
		t.Error(err)
	}
	if _, err := m.Function("nope"); !IsCode(err, ErrorNotFound) {
		t.Errorf("missing kernel: %v", err)
	}
	// A zero-sized grid never reaches the driver.
	if err := f.Launch([3]uint32{0, 1, 1}, [3]uint32{1, 1, 1}, 0, s, unsafe.Pointer(&arg), unsafe.Pointer(&cnt)); err == nil {
		t.Error("zero grid accepted")
	}
}

func TestLoadModuleJITLog(t *testing.T) {
	setup(t)
	bad := strings.Replace(add1PTX, "add.s32 %r7, %r6, 1;", "add.s32 %r7, %r6, %bogus;", 1)
	_, err := LoadModule([]byte(bad))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("bad PTX: %v", err)
	}
	if !strings.HasPrefix(ce.Name, "CUDA_ERROR_") || !strings.Contains(ce.Msg, "JIT log") {
		t.Errorf("bad PTX error lacks name or JIT log: %v", err)
	}
	t.Log(err)
}

func TestMappedHostMemory(t *testing.T) {
	setup(t)
	_, f := loadAdd1(t)
	const n = 64
	h, err := HostAllocMapped(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(h.Bytes[4*i:], uint32(i))
	}
	arg, cnt := uint64(h.Dev), uint32(n)
	if err := f.Launch([3]uint32{1, 1, 1}, [3]uint32{n, 1, 1}, 0, nil, unsafe.Pointer(&arg), unsafe.Pointer(&cnt)); err != nil {
		t.Fatal(err)
	}
	if err := (*Stream)(nil).Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, v := range u32s(h.Bytes) {
		if v != uint32(i)+1 {
			t.Fatalf("host[%d] = %d after kernel, want %d", i, v, i+1)
		}
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(); err == nil {
		t.Error("double free accepted")
	}
}

// TestFallbackContext: a goroutine on a thread with no current context
// still gets working CUDA calls through the fallback context.
func TestFallbackContext(t *testing.T) {
	setup(t)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := detachCurrent(); err != nil {
			errc <- err
			return
		}
		p, err := Malloc(64)
		if err != nil {
			errc <- err
			return
		}
		in := bytes.Repeat([]byte{7}, 64)
		out := make([]byte, 64)
		if err := errors.Join(MemcpyHtoD(p, in), MemcpyDtoH(out, p), Free(p)); err != nil {
			errc <- err
			return
		}
		if !bytes.Equal(in, out) {
			errc <- errors.New("round trip differs")
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestContextDo: Do makes its context current for f alone, on a thread
// that had none, and puts back what was there (nothing) afterwards, also
// when f fails or Do nests; calls inside it work.
func TestContextDo(t *testing.T) {
	setup(t)
	ctx, err := Device(0).PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errc <- func() error {
			if err := detachCurrent(); err != nil {
				return err
			}
			inside := func() error {
				cur, err := currentContext()
				if err != nil {
					return err
				}
				if cur != uintptr(ctx.h) {
					return fmt.Errorf("inside Do the current context is %#x, want %#x", cur, uintptr(ctx.h))
				}
				p, err := Malloc(64)
				if err != nil {
					return err
				}
				return Free(p)
			}
			if err := ctx.Do(func() error { return errors.Join(inside(), ctx.Do(inside)) }); err != nil {
				return err
			}
			failed := errors.New("f failed")
			if err := ctx.Do(func() error { return failed }); err != failed {
				return fmt.Errorf("Do returned %v, want f's error", err)
			}
			if cur, err := currentContext(); err != nil || cur != 0 {
				return fmt.Errorf("after Do the current context is %#x (%v), want none", cur, err)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
