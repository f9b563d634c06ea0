package msccl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// joinRanks runs f as world ranks of one job on the cpu device, each a
// goroutine with its own RankComm, and fails t with every rank's error.
func joinRanks(t *testing.T, world int, f func(ctx context.Context, rc *RankComm) error) {
	t.Helper()
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	errs := par.Each(world, func(r int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		rc, err := JoinComm(ctx, id, r, world, CommOptions{Device: "cpu", Timeout: 20 * time.Second})
		if err != nil {
			return err
		}
		err = f(ctx, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// i32s encodes v as little-endian int32s; at reads element i of b.
func i32s(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func at(b []byte, i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }

// val is rank q's input element i: distinct per rank and element.
func val(q, i int) int32 { return int32(q*100003 + i%9973 + 1) }

// collCase is one collective with its buffer lengths (in elements, for
// a count of k on n ranks) and the element i of rank r's output.
type collCase struct {
	c       Collective
	in, out func(k, n int) int
	want    func(r, n, k, i int) int32
	root    int
}

func collCases() []collCase {
	one := func(k, n int) int { return k }
	all := func(k, n int) int { return k * n }
	sum := func(n, i int) int32 {
		var s int32
		for q := range n {
			s += val(q, i)
		}
		return s
	}
	return []collCase{
		{c: ir.AllReduce, in: one, out: one, want: func(r, n, k, i int) int32 { return sum(n, i) }},
		{c: ir.AllGather, in: one, out: all, want: func(r, n, k, i int) int32 { return val(i/k, i%k) }},
		{c: ir.ReduceScatter, in: all, out: one, want: func(r, n, k, i int) int32 { return sum(n, r*k+i) }},
		{c: ir.AllToAll, in: all, out: all, want: func(r, n, k, i int) int32 { return val(i/k, r*k+i%k) }},
		{c: ir.Broadcast, root: 1, in: one, out: one, want: func(r, n, k, i int) int32 { return val(1, i) }},
		{c: ir.Reduce, root: 2, in: one, out: one, want: func(r, n, k, i int) int32 { return sum(n, i) }},
		{c: ir.Gather, root: 0, in: one, out: all, want: func(r, n, k, i int) int32 { return val(i/k, i%k) }},
		{c: ir.Scatter, root: 1, in: all, out: one, want: func(r, n, k, i int) int32 { return val(1, r*k+i) }},
	}
}

// checkColl runs tc at count k on rc and checks every element of its
// output where the collective defines one (everywhere, or at the root);
// off the root the argument NCCL ignores is passed empty.
func checkColl(ctx context.Context, rc *RankComm, tc collCase, k int) error {
	r, n := rc.Rank(), rc.Size()
	in := make([]int32, tc.in(k, n))
	for i := range in {
		in[i] = val(r, i)
	}
	inB := i32s(in)
	outB := make([]byte, 4*tc.out(k, n))
	for i := range outB {
		outB[i] = 0xEE
	}
	inM, outM := HostMem(inB), HostMem(outB)
	root := tc.root % n
	if r != root && (tc.c == ir.Broadcast || tc.c == ir.Scatter) {
		inM = Mem{}
	}
	if r != root && (tc.c == ir.Reduce || tc.c == ir.Gather) {
		outM = Mem{}
	}
	if err := rc.Collective(ctx, Call{Collective: tc.c, In: inM, Out: outM, DType: I32, Root: root}); err != nil {
		return fmt.Errorf("%s of %d: %w", tc.c, k, err)
	}
	if outM.Len() == 0 {
		return nil
	}
	for i := range tc.out(k, n) {
		want := tc.want(r, n, k, i)
		if tc.c == ir.Broadcast || tc.c == ir.Scatter {
			want = tc.want(r, n, k, i) - val(1, 0) + val(root, 0)
		}
		if got := at(outB, i); got != want {
			return fmt.Errorf("%s of %d elements (root %d): element %d is %d, want %d", tc.c, k, root, i, got, want)
		}
	}
	return nil
}

// Every collective on caller buffers across 4 ranks, at counts inside
// and outside the plans' size rules (1 and 1001 elements run staged),
// and a second round at the same size reusing the opened plans.
func TestCollectivesCPU(t *testing.T) {
	joinRanks(t, 4, func(ctx context.Context, rc *RankComm) error {
		for _, tc := range collCases() {
			for _, k := range []int{1, 1001, 1024, 1001} {
				if err := checkColl(ctx, rc, tc, k); err != nil {
					return err
				}
			}
		}
		if got := len(rc.coll.execs); got != 8*3 {
			// 1001 runs twice at one cached size; 1 and 1024 once each.
			return fmt.Errorf("%d plans opened, want %d (8 collectives × 3 sizes)", got, 8*3)
		}
		return nil
	})
}

// A world of one rank: every collective is a copy of the input, as with
// NCCL, with no plan (no plan of one rank has operations).
func TestCollectivesOneRank(t *testing.T) {
	joinRanks(t, 1, func(ctx context.Context, rc *RankComm) error {
		for _, tc := range collCases() {
			tc.root = 0
			if tc.c == ir.Broadcast || tc.c == ir.Scatter {
				tc.want = func(r, n, k, i int) int32 { return val(0, i) + val(1, 0) - val(0, 0) }
			}
			if err := checkColl(ctx, rc, tc, 1001); err != nil {
				return err
			}
		}
		if len(rc.coll.execs) != 0 {
			return fmt.Errorf("a world of one opened %d plans", len(rc.coll.execs))
		}
		return nil
	})
}

// Bad calls are refused with the reason before anything runs, on every
// rank alike.
func TestCollectiveArguments(t *testing.T) {
	joinRanks(t, 2, func(ctx context.Context, rc *RankComm) error {
		b := HostMem(make([]byte, 64))
		for _, tc := range []struct {
			cl   Call
			want string
		}{
			{Call{Collective: ir.AllReduce, In: b, Out: HostMem(make([]byte, 60)), DType: F32}, "an input and an output of one length"},
			{Call{Collective: ir.AllGather, In: b, Out: b, DType: F32}, "an output of n × the input"},
			{Call{Collective: ir.AllReduce, In: b, Out: b, DType: F32, Op: "avg"}, `reduction "avg"`},
			{Call{Collective: ir.AllReduce, In: b, Out: b, DType: F32, Stream: 7}, "pass 0"},
			{Call{Collective: ir.Broadcast, In: b, Out: b, DType: F32, Root: 2}, "root 2 is not a rank of 2"},
			{Call{Collective: ir.SendRecv, In: b, Out: b, DType: F32}, `collective "sendrecv"`},
			{Call{Collective: ir.AllReduce, In: HostMem(make([]byte, 6)), Out: HostMem(make([]byte, 6)), DType: F32}, "not whole f32 elements"},
			{Call{Collective: ir.AllReduce, In: DeviceMem(4096, 64), Out: b, DType: F32}, "device memory on the cpu device"},
		} {
			if err := rc.Collective(ctx, tc.cl); err == nil || !strings.Contains(err.Error(), tc.want) {
				return fmt.Errorf("%+v: %v, want %q", tc.cl, err, tc.want)
			}
		}
		p, err := CompileAlgorithm("", "allgather_ring", map[string]int64{"ranks": 2})
		if err != nil {
			return err
		}
		if err := rc.AllReduce(ctx, b, b, F32, Sum, WithPlan(p)); err == nil || !strings.Contains(err.Error(), "is for allgather") {
			return fmt.Errorf("allgather plan for allreduce: %v", err)
		}
		// The plan given runs (two ranks, allgather of 16 floats).
		out := make([]byte, 128)
		return rc.AllGather(ctx, b, HostMem(out), F32, WithPlan(p))
	})
}

// Two goroutines of each rank issue collectives of different sizes on
// one communicator at once: the communicator runs them one at a time, so
// the collective opening of each size's plan (channels, memory exchange)
// never interleaves with the other's. The second goroutine starts once
// the first holds the communicator, so every rank takes them in one order.
func TestConcurrentCollectives(t *testing.T) {
	joinRanks(t, 2, func(ctx context.Context, rc *RankComm) error {
		r := rc.Rank()
		run := func(k int) error {
			v := make([]int32, k)
			for i := range v {
				v[i] = val(r, i)
			}
			b := i32s(v)
			if err := rc.AllReduce(ctx, HostMem(b), HostMem(b), I32, Sum); err != nil {
				return err
			}
			for i := range k {
				if got, want := at(b, i), val(0, i)+val(1, i); got != want {
					return fmt.Errorf("allreduce of %d: element %d is %d, want %d", k, i, got, want)
				}
			}
			return nil
		}
		// The second call starts once the first holds the communicator,
		// so every rank issues them in one order.
		entered := make(chan struct{}, 2)
		var inside atomic.Int32
		overlap := make(chan error, 2)
		rc.coll.entered = func() func() {
			if n := inside.Add(1); n > 1 {
				overlap <- fmt.Errorf("%d calls inside the communicator at once", n)
			}
			entered <- struct{}{}
			return func() { inside.Add(-1) }
		}
		first := make(chan error, 1)
		go func() { first <- run(3000) }()
		<-entered
		second := run(500)
		err := errors.Join(<-first, second)
		close(overlap)
		for e := range overlap {
			err = errors.Join(err, e)
		}
		return err
	})
}

// SendBuf/RecvBuf: a ring (each rank sends to the next and receives
// from the one before), a send to itself, and the refusals.
func TestSendRecvBuf(t *testing.T) {
	joinRanks(t, 3, func(ctx context.Context, rc *RankComm) error {
		r, n := rc.Rank(), rc.Size()
		out := i32s([]int32{val(r, 0), val(r, 1), val(r, 2)})
		if err := rc.SendBuf(ctx, HostMem(out), (r+1)%n); err != nil {
			return err
		}
		in := make([]byte, len(out))
		if err := rc.RecvBuf(ctx, HostMem(in), (r+n-1)%n); err != nil {
			return err
		}
		for i := range 3 {
			if got, want := at(in, i), val((r+n-1)%n, i); got != want {
				return fmt.Errorf("received element %d is %d, want %d", i, got, want)
			}
		}
		if err := rc.SendBuf(ctx, HostMem(out), r); err != nil {
			return err
		}
		self := make([]byte, len(out))
		if err := rc.RecvBuf(ctx, HostMem(self), r); err != nil || string(self) != string(out) {
			return fmt.Errorf("send to itself: %v", err)
		}
		if err := rc.RecvBuf(ctx, HostMem(self), r); err == nil || !strings.Contains(err.Error(), "no send to itself") {
			return fmt.Errorf("recv from itself with nothing sent: %v", err)
		}
		if err := rc.SendBuf(ctx, HostMem(out), n); err == nil || !strings.Contains(err.Error(), "not a rank of 3") {
			return fmt.Errorf("peer out of range: %v", err)
		}
		if err := rc.SendBuf(ctx, HostMem(out), (r+1)%n, OnStream(5)); err == nil || !strings.Contains(err.Error(), "stream 0") {
			return fmt.Errorf("stream on the cpu device: %v", err)
		}
		// A length mismatch is named on the receiving side.
		if err := rc.SendBuf(ctx, HostMem(out[:4]), (r+1)%n); err != nil {
			return err
		}
		if err := rc.RecvBuf(ctx, HostMem(in), (r+n-1)%n); err == nil || !strings.Contains(err.Error(), "which sent 4") {
			return fmt.Errorf("short message: %v", err)
		}
		return nil
	})
}

// Ranks that make different calls hang until the watchdog; the error then
// names what each rank made, not only the stuck blocks.
func TestCallMismatchNamed(t *testing.T) {
	fulltest.Skip(t, "waits for the cpu device's 10 s watchdog")
	joinRanks(t, 2, func(ctx context.Context, rc *RankComm) error {
		a, b := make([]byte, 4096), make([]byte, 8192)
		for _, buf := range [][]byte{a, b} { // both sizes opened on both ranks
			if err := rc.AllReduce(ctx, HostMem(buf), HostMem(buf), F32, Sum); err != nil {
				return err
			}
		}
		buf := a
		if rc.Rank() == 1 {
			buf = b
		}
		err := rc.AllReduce(ctx, HostMem(buf), HostMem(buf), F32, Sum)
		if err == nil || !strings.Contains(err.Error(), "the ranks made different calls") ||
			!strings.Contains(err.Error(), "call #3: allreduce of 4096 bytes") || !strings.Contains(err.Error(), "call #3: allreduce of 8192 bytes") {
			return fmt.Errorf("mismatched calls: %v", err)
		}
		if ir.ErrorCode(err) != ir.CodeWatchdog {
			return fmt.Errorf("the mismatch lost the watchdog's code: %v", err)
		}
		return nil
	})
}
