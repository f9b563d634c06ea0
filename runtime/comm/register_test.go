package comm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// word is the semaphore word at l, as the cpu device maps it.
func word(l comm.Loc) *atomic.Uint64 {
	b := l.Mem.(*cpudev.Memory).Bytes()
	return (*atomic.Uint64)(unsafe.Pointer(&b[l.Off]))
}

// User channels pair the k-th channel from A to B with the k-th from B
// to A: each end adds a value naming itself to its Remote word, and each
// end's Inbound then holds its partner's value. A registered buffer is
// mapped at every peer of the node.
func TestUserChannelsPair(t *testing.T) {
	lists := [][]int{{1, 2, 1}, {0, 0, 2}, {1, 0}}
	commtest.Check(t, join(t, []string{"a", "a", "a"}, func(ctx context.Context, c *comm.Comm) error {
		r := c.Rank()
		u, err := c.UserChannels(ctx, lists[r])
		if err != nil {
			return err
		}
		defer u.Close()
		for _, ch := range u.Chans {
			word(ch.Remote).Add(uint64(100*r + ch.Index + 1))
		}
		if err := c.Bootstrap().Barrier(ctx); err != nil {
			return err
		}
		for _, ch := range u.Chans {
			if got, want := word(ch.Inbound).Load(), uint64(100*ch.Peer+ch.Partner+1); got != want {
				return fmt.Errorf("rank %d channel %d (peer %d, partner %d): inbound %d, want %d", r, ch.Index, ch.Peer, ch.Partner, got, want)
			}
			if word(ch.Expected).Load() != 0 {
				return fmt.Errorf("rank %d channel %d: expected count starts at %d", r, ch.Index, word(ch.Expected).Load())
			}
		}
		m, err := c.Device().Alloc(64)
		if err != nil {
			return err
		}
		defer m.Close()
		m.(*cpudev.Memory).Bytes()[0] = byte(r + 7)
		reg, err := c.RegisterBuffer(ctx, m)
		if err != nil {
			return err
		}
		defer reg.Close()
		for p, pm := range reg.Peers {
			if (pm == nil) != (p == r) {
				return fmt.Errorf("rank %d: peer %d mapped %v", r, p, pm != nil)
			}
			if pm != nil && pm.(*cpudev.Memory).Bytes()[0] != byte(p+7) {
				return fmt.Errorf("rank %d sees %d in rank %d's buffer", r, pm.(*cpudev.Memory).Bytes()[0], p)
			}
		}
		return c.Bootstrap().Barrier(ctx)
	}))
}

// Every rank refuses a set of channels any rank got wrong, with the same
// message, before allocating anything; none waits for the others.
func TestUserChannelsRefusals(t *testing.T) {
	for _, c := range []struct {
		nodes []string
		lists [][]int
		want  string
	}{
		{[]string{"a", "a"}, [][]int{{1, 1}, {0}}, "rank 0 lists 2 channels to rank 1, which lists 1 back"},
		{[]string{"a", "a"}, [][]int{{1}, {1}}, "rank 1's channel 0: peer 1 is the rank itself"},
		{[]string{"a", "a"}, [][]int{{2}, {0}}, "rank 0's channel 0: peer 2 is outside the job's 2 ranks"},
		{[]string{"a", "b"}, [][]int{{1}, {0}}, `rank 0's channel 0: peer 1 is on node "b", rank 0 on "a"; memory is shared within a node only`},
	} {
		errs := join(t, c.nodes, func(ctx context.Context, cm *comm.Comm) error {
			u, err := cm.UserChannels(ctx, c.lists[cm.Rank()])
			if err == nil {
				u.Close()
			}
			return err
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: rank %d: %v, want %q", c.lists, r, err, c.want)
			}
		}
	}
}

// A buffer of another device cannot be registered: the error says why.
func TestRegisterRefusesForeignMemory(t *testing.T) {
	errs := join(t, []string{"a", "a"}, func(ctx context.Context, c *comm.Comm) error {
		_, err := c.RegisterBuffer(ctx, foreign{})
		return err
	})
	for r, err := range errs {
		if err == nil || !errors.Is(err, errForeign) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

var errForeign = errors.New("foreign memory cannot be exported")

type foreign struct{}

func (foreign) Size() int64                  { return 64 }
func (foreign) Export() (comm.Handle, error) { return comm.Handle{}, errForeign }
func (foreign) Close() error                 { return nil }
