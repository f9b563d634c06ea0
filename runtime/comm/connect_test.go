package comm_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// wordAt is the semaphore word at l (cpu device memory).
func wordAt(l comm.Loc) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&l.Mem.(*cpudev.Memory).Bytes()[l.Off]))
}

// tag is what the end i of kind k of rank r writes into its partner's
// inbound word, so the partner can tell which end its word is paired with.
func tag(r int, k comm.Kind, i int) uint64 { return uint64(1000*r + 100*int(k) + i + 1) }

// The k-th channel of a kind from A to B pairs with the k-th of that
// kind from B to A, through the words themselves: every end adds its tag
// to its Remote word, and every paired end finds its partner's tag in
// its Inbound word. An end the peer lists no channel back for stays
// unpaired (Partner -1, no Remote) and nothing reaches it.
func TestConnectPairsByWiring(t *testing.T) {
	w := &comm.Wiring{Name: "pairs", Source: []byte("pairs"), Ranks: []comm.RankWiring{
		{Memory: []int{1, 2, 1, 1}, Port: []int{2}},
		{Memory: []int{0, 2, 0}},
		{Memory: []int{0, 1}, Port: []int{0}},
	}}
	partners := [][2][]int{ // by rank: memory, port
		{{0, 0, 2, -1}, {0}},
		{{0, 1, 2}, nil},
		{{1, 1}, {0}},
	}
	commtest.Check(t, join(t, []string{"a", "a", "a"}, func(ctx context.Context, c *comm.Comm) error {
		cs, err := c.Connect(ctx, w)
		if err != nil {
			return err
		}
		defer cs.Close()
		r, mine := c.Rank(), &w.Ranks[c.Rank()]
		ends := [2][]comm.Channel{cs.Memory, cs.Port}
		for s, k := range []comm.Kind{comm.KindMemory, comm.KindPort} {
			if got, want := fmt.Sprint(partnersOf(ends[s])), fmt.Sprint(partners[r][s]); got != want {
				return fmt.Errorf("%s partners %s, want %s", k, got, want)
			}
			for i, e := range ends[s] {
				if e.Type != k || e.Index != i || e.Peer != [2][]int{mine.Memory, mine.Port}[s][i] {
					return fmt.Errorf("%s channel %d: %+v", k, i, e)
				}
				if (e.Remote.Mem != nil) != (e.Partner >= 0) {
					return fmt.Errorf("%s channel %d: partner %d with remote %v", k, i, e.Partner, e.Remote.Mem)
				}
				if e.Partner >= 0 {
					wordAt(e.Remote).Add(tag(r, k, i))
				}
			}
		}
		if want := int64(len(mine.Memory)+len(mine.Port)) * comm.WordBytes; cs.Pulse[r].Off != want {
			return fmt.Errorf("pulse at byte %d, want %d", cs.Pulse[r].Off, want)
		}
		if err := c.Bootstrap().Barrier(ctx); err != nil {
			return err
		}
		for s, k := range []comm.Kind{comm.KindMemory, comm.KindPort} {
			for i, e := range ends[s] {
				want := uint64(0)
				if e.Partner >= 0 {
					want = tag(e.Peer, k, e.Partner)
				}
				if got := wordAt(e.Inbound).Load(); got != want {
					return fmt.Errorf("%s channel %d: inbound word %d, want %d", k, i, got, want)
				}
			}
		}
		return c.Bootstrap().Barrier(ctx)
	}))
}

func partnersOf(ends []comm.Channel) []int {
	var out []int
	for _, e := range ends {
		out = append(out, e.Partner)
	}
	return out
}

// Refusals name the place in the source that the wiring carries, or the
// rank and the buffer's number where it carries none.
func TestConnectNamesWhere(t *testing.T) {
	w := &comm.Wiring{Name: "reach", Source: []byte("reach"), Ranks: []comm.RankWiring{
		{Where: "gpus[0]", Reach: []comm.Reach{{Where: "gpus[0].remote_buffers[1]", Rank: 1, Over: []comm.Kind{comm.KindPort, comm.KindMemory}}}},
		{Reach: []comm.Reach{{Rank: 0, Over: []comm.Kind{comm.KindSwitch}}}},
	}}
	errs := join(t, []string{"a", "b"}, func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Connect(ctx, w)
		return err
	})
	want := []string{
		`comm: gpus[0].remote_buffers[1]: rank 1 is on node "b" (this rank: "a") and the buffer is reached over memory channels`,
		`comm: rank 1: remote buffer 0: rank 0 is on node "a" (this rank: "b") and the buffer is reached over switch channels`,
	}
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), want[r]) {
			t.Errorf("rank %d: %v, want %q", r, err, want[r])
		}
	}
}
