package comm

import "fmt"

// Kind is what a channel is built on: memory channels are loads and
// stores to memory the node's ranks share, port channels go through a
// proxy and may cross nodes, switch channels are NVLink multicast (never
// laid out by Connect: they have no semaphore words of their own).
type Kind uint8

const (
	KindNone Kind = iota
	KindMemory
	KindPort
	KindSwitch
)

var kindNames = [...]string{"none", "memory", "port", "switch"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Wiring is what Connect lays out, described alike on every rank: each
// rank's memory and port channels by peer, in the order its executor
// indexes them, and the other ranks' memory it reaches. An executor
// derives it from what it runs (a plan); comm reads nothing else of it,
// so the runtime knows no plan format.
type Wiring struct {
	// Name names the source in errors (a plan's name).
	Name string
	// Source is the source's bytes (a plan's encoding): every rank must
	// connect the same one, and only a hash of it travels.
	Source []byte
	Ranks  []RankWiring // by rank
}

// RankWiring is one rank's part of a Wiring.
type RankWiring struct {
	// Where names the rank in errors in the source's terms ("gpus[3]");
	// empty means "rank N".
	Where string
	// Memory and Port are the peers of the rank's memory and port
	// channels. The k-th channel of a kind from rank A to rank B pairs
	// with the k-th of that kind from B to A.
	Memory, Port []int
	// Reach lists the other ranks' memory the rank's channels access.
	Reach []Reach
}

// Reach is a buffer of another rank that a rank accesses over channels
// of the kinds Over (only port channels cross nodes).
type Reach struct {
	Where string // names it in errors ("gpus[3].remote_buffers[2]")
	Rank  int
	Over  []Kind
}

// where names rank r of w in errors.
func (w *Wiring) where(r int) string {
	if r >= 0 && r < len(w.Ranks) && w.Ranks[r].Where != "" {
		return w.Ranks[r].Where
	}
	return fmt.Sprintf("rank %d", r)
}

// chans returns rank r's peers of channels of kind k.
func (rw *RankWiring) chans(k Kind) []int {
	if k == KindPort {
		return rw.Port
	}
	return rw.Memory
}

// partners pairs the channels of kind k of rank r of w with their ends
// at the peers: the k-th channel to q pairs with the k-th of q's
// channels back to r; -1 where q lists fewer, or where the peer is r
// itself or outside the job (nothing waits on such an end).
func (w *Wiring) partners(r int, k Kind) []int {
	mine := w.Ranks[r].chans(k)
	out := make([]int, len(mine))
	back := map[int][]int{} // peer → indices of its channels to r
	seen := map[int]int{}   // peer → channels to it so far
	for i, q := range mine {
		out[i] = -1
		if q < 0 || q >= len(w.Ranks) || q == r {
			continue
		}
		if _, ok := back[q]; !ok {
			back[q] = []int{}
			for j, p := range w.Ranks[q].chans(k) {
				if p == r {
					back[q] = append(back[q], j)
				}
			}
		}
		if n := seen[q]; n < len(back[q]) {
			out[i] = back[q][n]
		}
		seen[q]++
	}
	return out
}
