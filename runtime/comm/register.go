package comm

import (
	"context"
	"encoding/binary"
	"fmt"
)

// Registered is a buffer of this rank shared with the ranks of its node
// for channels in a user's kernel: Local is this rank's, Peers[r] rank
// r's as mapped here (nil for this rank and ranks off the node).
type Registered struct {
	Local Memory
	Peers []Memory
}

// Close unmaps the peers' buffers; Local stays the caller's.
func (r *Registered) Close() error { return closeMems(r.Peers) }

// closeMems closes every memory of ms and clears its entry (closing
// twice is harmless); the first error is returned.
func closeMems(ms []Memory) error {
	var first error
	for i, m := range ms {
		if m != nil {
			if err := m.Close(); err != nil && first == nil {
				first = err
			}
			ms[i] = nil
		}
	}
	return first
}

// RegisterBuffer shares mem with every rank of the node and maps theirs
// (collective: every rank calls it, in the same order as its other
// collective calls). mem must be memory of this communicator's device
// (its Alloc): only that can be exported without a copy.
func (c *Comm) RegisterBuffer(ctx context.Context, mem Memory) (*Registered, error) {
	all, err := c.Exchange(ctx, mem)
	if err != nil {
		return nil, err
	}
	all[c.rank] = nil
	return &Registered{Local: mem, Peers: all}, nil
}

// UserChannel is one end of a channel a user's kernel signals and waits
// on: Inbound is its word in this rank's region (the peer's signals add
// to it), Expected the word that counts the signals consumed, Remote the
// paired end's inbound word in the peer's region as mapped here. The k-th
// channel from rank A to rank B pairs with the k-th from B to A.
type UserChannel struct {
	Peer, Index, Partner int
	Inbound, Expected    Loc
	Remote               Loc
}

// UserChannels are the semaphores behind a set of user channels: this
// rank's region and the node's peers' regions mapped here.
type UserChannels struct {
	Chans   []UserChannel
	Regions []Memory // by rank: [rank] is this rank's, nil off node
}

// Close unmaps the peers' regions and frees this rank's.
func (u *UserChannels) Close() error { return closeMems(u.Regions) }

// userChanWords is the region's words per channel: inbound, expected.
const userChanWords = 2

// UserChannels connects one channel to each entry of peers (a peer may be
// listed several times: several channels). It is collective: every rank
// calls it, and every rank's list is checked by every rank before any
// memory is allocated, so that all refuse the same job alike: a peer
// outside the job, this rank itself, a peer on another node (memory is
// shared within a node only) or one that lists fewer channels back.
func (c *Comm) UserChannels(ctx context.Context, peers []int) (*UserChannels, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	blob := make([]byte, 0, 4*len(peers))
	for _, p := range peers {
		blob = binary.LittleEndian.AppendUint32(blob, uint32(int32(p)))
	}
	blobs, err := c.bs.AllGather(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("comm: rank %d: exchanging channel peers: %w", c.rank, err)
	}
	lists := make([][]int, len(blobs))
	for r, b := range blobs {
		for i := 0; i+4 <= len(b); i += 4 {
			lists[r] = append(lists[r], int(int32(binary.LittleEndian.Uint32(b[i:]))))
		}
	}
	partners, err := c.pairChannels(lists)
	if err != nil {
		return nil, err
	}
	mem, err := c.dev.Alloc(int64(max(1, len(peers)) * userChanWords * WordBytes))
	if err != nil {
		return nil, fmt.Errorf("comm: rank %d: channel semaphores: %w", c.rank, err)
	}
	regions, err := c.Exchange(ctx, mem)
	if err != nil {
		mem.Close()
		return nil, err
	}
	u := &UserChannels{Regions: regions}
	for i, p := range peers {
		j := partners[i]
		u.Chans = append(u.Chans, UserChannel{
			Peer: p, Index: i, Partner: j,
			Inbound:  Loc{mem, int64(i*userChanWords) * WordBytes},
			Expected: Loc{mem, int64(i*userChanWords+1) * WordBytes},
			Remote:   Loc{regions[p], int64(j*userChanWords) * WordBytes},
		})
	}
	return u, nil
}

// pairChannels checks every rank's list and returns, for each channel of
// this rank, the index of its pair in the peer's list.
func (c *Comm) pairChannels(lists [][]int) ([]int, error) {
	for r, l := range lists {
		for i, p := range l {
			switch {
			case p < 0 || p >= c.size:
				return nil, fmt.Errorf("comm: rank %d's channel %d: peer %d is outside the job's %d ranks", r, i, p, c.size)
			case p == r:
				return nil, fmt.Errorf("comm: rank %d's channel %d: peer %d is the rank itself", r, i, p)
			case c.nodes[p] != c.nodes[r]:
				return nil, fmt.Errorf("comm: rank %d's channel %d: peer %d is on node %q, rank %d on %q; memory is shared within a node only", r, i, p, c.nodes[p], r, c.nodes[r])
			}
		}
	}
	// nth[r][p] lists the positions of peer p in rank r's list.
	nth := make([]map[int][]int, len(lists))
	for r, l := range lists {
		nth[r] = map[int][]int{}
		for i, p := range l {
			nth[r][p] = append(nth[r][p], i)
		}
	}
	for r := range lists {
		for p, idx := range nth[r] {
			if back := len(nth[p][r]); back != len(idx) {
				return nil, fmt.Errorf("comm: rank %d lists %d channels to rank %d, which lists %d back; the k-th channel of each pairs with the k-th of the other", r, len(idx), p, back)
			}
		}
	}
	out := make([]int, len(lists[c.rank]))
	seen := map[int]int{}
	for i, p := range lists[c.rank] {
		out[i] = nth[p][c.rank][seen[p]]
		seen[p]++
	}
	return out, nil
}
