package cudaexec

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cudadev"
)

// Ranks that are goroutines (or threads) of one process launch into one
// CUDA context, and the driver deals a context's streams onto
// CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default), each run in
// order: two ranks' streams, the caller's streams of Enqueue above all,
// which this package does not make, may share one. A queue holds up
// everything behind an entry that waits, and a rank's second launch
// queued on its stream waits for its first. So when rank X has queued
// launches k and k+1 on a shared queue before rank Y queued its launch
// k there, Y's kernel cannot start until X's launch k ends, and X's
// launch k waits for Y's kernel: a deadlock that only the watchdog ends.
// X's launch k times out, k+1 then runs, Y's launch k runs late with
// everything it needs already in place, and Y reports nothing. That was
// TestOpenRankOracle's caller's-stream phase on the H200 (two Enqueues
// back to back per rank, nothing between ranks): ranks 0, 2, 3 stuck on
// "packet wait: expected flag 12, saw 10" (the half of the scratch the
// late rank's launch k would have written still held launch k-2's
// packets, hence the gap of two), rank 1 without an error, and the next
// collective step failing because its peers had given up; earlier the
// same phase of allgather_direct and reducescatter_ring ("expected token
// 49, saw 48"). runtime/cuda's TestKernelsOnManyStreamsRunTogether shows
// the queue rule (beyond 8 streams, 8 first kernels start), and
// TestLaunchRoundsOnSharedQueues that launches queued in rounds run.
//
// Which streams share a queue is the driver's choice, so the order of
// submission is what the executor fixes: the ranks of one job in this
// process launch in rounds. After submitting its launch k a rank waits,
// on the host, until every other rank of the job in this process has
// submitted its launch k too; only then does it return (and record its
// event, or queue launch k+1, or let its caller queue more). Every queue
// then holds every rank's launch k before anything queued after any
// rank's launch k, so each of them starts. Ranks of other processes have
// contexts (and queues) of their own and are not waited for, and a rank
// alone in its process pays nothing. The wait is bounded by the
// communicator's timeout and ends when a peer fails or closes.
type launchRounds struct {
	mu      sync.Mutex
	key     *cudadev.Memory
	members []int          // the job's ranks in this process, ascending
	n       map[int]uint64 // launches each member has submitted (or given up)
	closed  map[int]bool   // members that launch no more: never waited for
	changed chan struct{}  // closed and replaced at every change
	refs    int
}

var rounds = struct {
	mu    sync.Mutex
	byKey map[*cudadev.Memory]*launchRounds
}{byKey: map[*cudadev.Memory]*launchRounds{}}

// inProcess lists the ranks whose sync region this process owns or
// aliases (ranks of this process), ascending, and the allocation that
// names the job's rounds: the lowest such rank's own sync region. Every
// rank of the process finds the same.
func inProcess(conns *comm.Connections) ([]int, *cudadev.Memory) {
	var members []int
	var key *cudadev.Memory
	for q, m := range conns.Sync {
		cm, ok := m.(*cudadev.Memory)
		if !ok || cm == nil || cm.Owner() == nil {
			continue
		}
		if key == nil {
			key = cm.Owner()
		}
		members = append(members, q)
	}
	return members, key
}

// joinRounds enters rank in its job's rounds; nil when it is the job's
// only rank in this process.
func joinRounds(conns *comm.Connections, rank int) *launchRounds {
	members, key := inProcess(conns)
	if len(members) < 2 {
		return nil
	}
	rounds.mu.Lock()
	defer rounds.mu.Unlock()
	lr := rounds.byKey[key]
	if lr == nil {
		lr = newLaunchRounds(key, members)
		rounds.byKey[key] = lr
	}
	lr.refs++
	return lr
}

func newLaunchRounds(key *cudadev.Memory, members []int) *launchRounds {
	return &launchRounds{key: key, members: members, n: map[int]uint64{}, closed: map[int]bool{}, changed: make(chan struct{})}
}

// changedLocked wakes every waiter; lr.mu is held.
func (lr *launchRounds) changedLocked() {
	close(lr.changed)
	lr.changed = make(chan struct{})
}

// behindLocked lists the open members that have not reached k launches.
func (lr *launchRounds) behindLocked(k uint64) []int {
	var out []int
	for _, q := range lr.members {
		if !lr.closed[q] && lr.n[q] < k {
			out = append(out, q)
		}
	}
	return out
}

// round counts rank's next launch. A launch that was submitted waits (wait
// set) until every other member has counted as many; one that was
// refused counts without waiting (it will never run, so no peer's queue
// needs it; the refusal is the caller's error).
func (lr *launchRounds) round(rank int, wait bool, c *comm.Comm) error {
	lr.mu.Lock()
	lr.n[rank]++
	k := lr.n[rank]
	lr.changedLocked()
	if !wait {
		lr.mu.Unlock()
		return nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		behind := lr.behindLocked(k)
		if len(behind) == 0 {
			lr.mu.Unlock()
			return nil
		}
		ch := lr.changed
		lr.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(c.Timeout())
		}
		select {
		case <-ch:
		case <-c.Dead():
			return fmt.Errorf("cudaexec: rank %d: launch %d: %w (waiting for rank(s) %s of this process to launch theirs)", rank, k, c.Err(), ranksList(behind))
		case <-timer.C:
			return fmt.Errorf("cudaexec: rank %d: launch %d: rank(s) %s of this process had not launched theirs after %v; the ranks of one process launch in rounds (rankrounds.go), so each must call every collective, from its own thread, as the others do", rank, k, ranksList(behind), c.Timeout())
		}
		lr.mu.Lock()
	}
}

// stop marks rank as launching no more (closing, or broken by a hang or a
// failed launch, after which it refuses every launch): nobody waits for
// it again. A peer that did not hang would otherwise wait in its next
// launch for this rank, while this rank waits in Free's or Close's
// barrier for the peer, until the communicator's timeout.
func (lr *launchRounds) stop(rank int) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if !lr.closed[rank] {
		lr.closed[rank] = true
		lr.changedLocked()
	}
}

// leave stops rank and drops its reference; the last one forgets the
// job.
func (lr *launchRounds) leave(rank int) {
	lr.stop(rank)
	rounds.mu.Lock()
	defer rounds.mu.Unlock()
	lr.refs--
	if lr.refs == 0 && rounds.byKey[lr.key] == lr {
		delete(rounds.byKey, lr.key)
	}
}

func ranksList(rs []int) string {
	return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(rs)), ", "), "[]")
}

// refused counts a launch this rank gave up before submitting it (Enqueue
// after a hang, say), so that the peers' rounds do not wait for it.
func (e *RankExecutor) refused() {
	if e.rounds != nil {
		e.rounds.round(e.rank, false, e.c)
	}
}

// stopRounds tells this process's other ranks not to wait for this one's
// launches any more (it is broken or closing).
func (e *RankExecutor) stopRounds() {
	if e.rounds != nil {
		e.rounds.stop(e.rank)
	}
}
