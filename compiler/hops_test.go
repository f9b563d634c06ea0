package compiler

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// syncHops returns the largest number of cross-rank signal→wait edges on
// one chain of a plan's launch: ops of a block in order, the k-th signal
// into a channel end before the k-th wait on it (one hop), the k-th
// sem_release of a semaphore before its k-th sem_acquire. Every hop costs
// at least a signal's latency whatever the bytes, so at small sizes a
// plan's time grows with this count, not with its number of steps.
// Pipeline bodies are not entered (no plan this is used on has one).
func syncHops(t *testing.T, p *ir.Plan) int {
	t.Helper()
	type node struct{ rank, tb, op int }
	type end struct {
		rank int
		typ  ir.ChannelType
		idx  int // the receiver's flat channel index
	}
	type sem struct{ rank, id int }
	succ := map[node][]node{}
	hop := map[[2]node]bool{}
	signals, waits := map[end][]node{}, map[end][]node{}
	releases, acquires := map[sem][]node{}, map[sem][]node{}
	flat := func(r int, typ ir.ChannelType) []ir.FlatChannel { return p.GPUs[r].FlatChannels(typ) }
	var nodes []node
	for r := range p.GPUs {
		for b := range p.GPUs[r].ThreadBlocks {
			tb := &p.GPUs[r].ThreadBlocks[b]
			for i, op := range tb.Ops {
				n := node{r, b, i}
				nodes = append(nodes, n)
				if i > 0 {
					prev := node{r, b, i - 1}
					succ[prev] = append(succ[prev], n)
				}
				switch op.Code {
				case ir.OpSignal, ir.OpRlxSignal, ir.OpWait, ir.OpRlxWait:
					table := tb.ChannelTable(op.ChannelType)
					for _, id := range op.ChannelIDs {
						c := flat(r, op.ChannelType)[table[id]]
						if op.Code == ir.OpWait || op.Code == ir.OpRlxWait {
							e := end{r, op.ChannelType, table[id]}
							waits[e] = append(waits[e], n)
							continue
						}
						// The receiver's end: the peer's Nth channel back to r.
						found := false
						for j, pc := range flat(c.Peer, op.ChannelType) {
							if pc.Peer == r && pc.Nth == c.Nth {
								e := end{c.Peer, op.ChannelType, j}
								signals[e] = append(signals[e], n)
								found = true
								break
							}
						}
						if !found {
							t.Fatalf("rank %d block %d op %d: channel %d to rank %d has no partner", r, b, i, id, c.Peer)
						}
					}
				case ir.OpSemRelease, ir.OpSemAcquire:
					for _, id := range op.SemaphoreIDs() {
						s := sem{r, id}
						if op.Code == ir.OpSemRelease {
							releases[s] = append(releases[s], n)
						} else {
							acquires[s] = append(acquires[s], n)
						}
					}
				}
			}
		}
	}
	for e, ws := range waits {
		for k, w := range ws {
			if k < len(signals[e]) {
				s := signals[e][k]
				succ[s] = append(succ[s], w)
				hop[[2]node{s, w}] = true
			}
		}
	}
	for s, as := range acquires {
		for k, a := range as {
			if k < len(releases[s]) {
				succ[releases[s][k]] = append(succ[releases[s][k]], a)
			}
		}
	}
	// Longest path in hops over the DAG (Kahn's order); a cycle would be a
	// deadlock, which the proof rules out, but fail loudly rather than loop.
	indeg := map[node]int{}
	for _, ss := range succ {
		for _, s := range ss {
			indeg[s]++
		}
	}
	dist := map[node]int{}
	var queue []node
	for _, n := range nodes {
		if indeg[n] == 0 {
			queue = append(queue, n)
		}
	}
	best, done := 0, 0
	for len(queue) > 0 {
		a := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		done++
		best = max(best, dist[a])
		for _, b := range succ[a] {
			d := dist[a]
			if hop[[2]node{a, b}] {
				d++
			}
			dist[b] = max(dist[b], d)
			if indeg[b]--; indeg[b] == 0 {
				queue = append(queue, b)
			}
		}
	}
	if done != len(nodes) {
		t.Fatalf("%s: the ops' order has a cycle (%d of %d ops reached)", p.Name, done, len(nodes))
	}
	return best
}

// TestLibraryHops holds the library's programs to their depth in signal
// hops (syncHops). A ring takes one hop a step plus the start and end
// handshakes: all ranks take step s together. A ring written with one
// loop over ranks per step, each rank's send beside its neighbour's
// reduction, put a rank's send of step s behind its reduction of what its
// predecessor sent in step s, so step s went round the ring one rank at a
// time: 63 hops for the 8-rank allreduce (14 steps), which took 35 µs a
// step on the H200 where a ping-pong hop takes 3.7. Every other program
// is a direct one: at most a start handshake, one round per phase (two
// for the two-shot) and the end.
func TestLibraryHops(t *testing.T) {
	steps := map[string]func(n int) int{
		"allreduce_ring":     func(n int) int { return 2 * (n - 1) },
		"reducescatter_ring": func(n int) int { return n - 1 },
		"allgather_ring":     func(n int) int { return n - 1 },
	}
	for _, f := range libraryFiles(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".msccl")
		for _, n := range []int{3, 4, 8, 16} {
			if strings.Contains(name, "hierarchical") && n%2 != 0 {
				continue // two nodes of n/2 GPUs
			}
			t.Run(fmt.Sprintf("%s@%d", name, n), func(t *testing.T) {
				p, _ := compileFile(t, f, libraryDefs(name, int64(n), int64(n/2)), Options{})
				limit, what := 3, "a direct schedule"
				if st, ok := steps[name]; ok {
					limit, what = st(n)+2, fmt.Sprintf("%d steps, start and end", st(n))
				}
				if got := syncHops(t, p); got > limit {
					t.Errorf("%d signal hops on the longest chain, want at most %d (%s)", got, limit, what)
				}
			})
		}
	}
}
