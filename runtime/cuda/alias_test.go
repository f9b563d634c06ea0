package cuda

import (
	"encoding/binary"
	"syscall"
	"testing"
	"unsafe"
)

// aliasPTX: wait_word spins on a 64-bit word (acquire, system scope, as
// the executor's waits do) until it reaches want or timeout_ns pass, and
// stores what it last saw to out (bit 63 set on a timeout); signal_word
// adds one to a word (release, system scope, as a signal does).
const aliasPTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry wait_word(.param .u64 p_flag, .param .u64 p_out, .param .u64 p_want, .param .u64 p_timeout)
{
	.reg .pred %p<3>;
	.reg .b64 %rd<12>;
	ld.param.u64 %rd1, [p_flag];
	ld.param.u64 %rd2, [p_out];
	ld.param.u64 %rd3, [p_want];
	ld.param.u64 %rd4, [p_timeout];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mov.u64 %rd5, %globaltimer;
LOOP:
	ld.acquire.sys.global.u64 %rd6, [%rd1];
	setp.ge.u64 %p1, %rd6, %rd3;
	@%p1 bra DONE;
	mov.u64 %rd7, %globaltimer;
	sub.u64 %rd8, %rd7, %rd5;
	setp.lt.u64 %p2, %rd8, %rd4;
	@%p2 bra LOOP;
	mov.u64 %rd9, 1;
	shl.b64 %rd9, %rd9, 63;
	or.b64 %rd6, %rd6, %rd9;
DONE:
	st.global.u64 [%rd2], %rd6;
	ret;
}
.visible .entry signal_word(.param .u64 p_flag)
{
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [p_flag];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u64 %rd2, 1;
	red.release.sys.global.add.u64 [%rd1], %rd2;
	ret;
}
`

// TestVirtualAliasVisibility measures what the in-process OpenRank and
// capi tests of runs 4 and 6 depended on: a kernel spinning on a word
// through one mapping of a VMM allocation while a kernel running at the
// same time (another stream) signals it through a second mapping of the
// same allocation in this process (its own export imported again). The
// CUDA guide calls such virtual aliases incoherent until the writing
// operation completes; cudadev therefore never makes one within a
// process. The same signal through the same address is the control and
// must always arrive; the aliased directions are reported, not asserted
// (their outcome is the driver's and the hardware's), so the next GPU run
// says whether this was the cause.
func TestVirtualAliasVisibility(t *testing.T) {
	ctx := setup(t)
	d := ctx.Device()
	if ok, why, err := VMMSupported(d); err != nil || !ok {
		t.Skipf("no POSIX-fd VMM allocations: %s %v", why, err)
	}
	a, err := VMMCreate(d, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	fd, err := a.ExportFD()
	if err != nil {
		t.Fatal(err)
	}
	b, err := VMMImport(d, fd, a.Size())
	syscall.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	m, err := LoadModule([]byte(aliasPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	wait, err := m.Function("wait_word")
	if err != nil {
		t.Fatal(err)
	}
	signal, err := m.Function("signal_word")
	if err != nil {
		t.Fatal(err)
	}
	const trials = 16
	out := testMalloc(t, 8*trials)
	s1, s2 := testStream(t), testStream(t)
	one := [3]uint32{1, 1, 1}
	// run waits on waitAt+8i and signals signalAt+8i, trial by trial, and
	// counts the waits that timed out.
	run := func(name string, waitAt, signalAt DevicePtr) int {
		if err := Memset8(a.Ptr(), 0, 8*trials); err != nil {
			t.Fatal(err)
		}
		if err := Memset8(out, 0, 8*trials); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < trials; i++ {
			flag, dst := uint64(waitAt)+uint64(8*i), uint64(out)+uint64(8*i)
			want, timeout := uint64(1), uint64(200_000_000) // 200 ms
			if err := wait.Launch(one, one, 0, s1, unsafe.Pointer(&flag), unsafe.Pointer(&dst), unsafe.Pointer(&want), unsafe.Pointer(&timeout)); err != nil {
				t.Fatal(err)
			}
			sig := uint64(signalAt) + uint64(8*i)
			if err := signal.Launch(one, one, 0, s2, unsafe.Pointer(&sig)); err != nil {
				t.Fatal(err)
			}
			if err := s1.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if err := s2.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
		got := readDevice(t, out, 8*trials)
		missed := 0
		for i := 0; i < trials; i++ {
			if binary.LittleEndian.Uint64(got[8*i:])>>63 != 0 {
				missed++
			}
		}
		t.Logf("%s: %d of %d waits timed out (wait at %#x, signal at %#x)", name, missed, trials, uint64(waitAt), uint64(signalAt))
		return missed
	}
	if n := run("same address (control)", a.Ptr(), a.Ptr()); n != 0 {
		t.Errorf("a signal through the waiter's own address was missed %d times", n)
	}
	run("wait on the owner's mapping, signal through the alias", a.Ptr(), b.Ptr())
	run("wait on the alias, signal through the owner's mapping", b.Ptr(), a.Ptr())
}
