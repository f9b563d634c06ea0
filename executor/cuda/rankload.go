package cudaexec

import (
	"context"
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/runtime/comm"
)

// Ranks that are goroutines of one process share one CUDA context, and
// some driver calls wait for the whole context's work to drain before
// they return: loading a module (the driver registers it only on an idle
// GPU, holding the context's lock meanwhile, so the other threads'
// calls, launches included, wait too), and possibly allocating or
// freeing device memory. A peer's kernel that already runs and spins on
// this rank's signals never drains, so such a call made between the
// peer's launch and this rank's own waits for the peer's watchdog: the
// peer times out, goes on with what it has, and this rank's kernel runs
// afterwards alone. That was the in-process failure (one rank "never
// sees" its peers' writes while its own reach them; the rank that
// launched first, a different one each run). Between processes each
// rank has its own context and nothing of the kind happens.
//
// So the rank executor makes such calls only inside a step of every
// rank, with nothing of this job able to spin meanwhile: the barrier
// that opens the step means every rank has enqueued every launch before
// it (so whatever runs will end, and a drain only waits for that), and
// the all-gather that closes it means no rank launches what the step
// prepared before every rank has prepared it. Collective operations
// (Alloc, Free, Close, OpenRank's Connect) have such points already; a
// new binding (the first launch of a type, reduction and packet width on
// a buffer set, or Prepare) gets this one.

// inStep runs work, this rank's part of a step every rank of c takes at
// the same point of its sequence of collectives, between a barrier and
// an all-gather of every rank's verdict. A rank whose work failed returns
// its own error; the others learn which ranks failed, so that none of
// them launches a kernel that would wait for a rank that will not run.
func inStep(c *comm.Comm, rank int, what string, work func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout())
	defer cancel()
	bs := c.Bootstrap()
	if err := bs.Barrier(ctx); err != nil {
		return fmt.Errorf("cudaexec: rank %d: waiting for the other ranks before %s: %w", rank, what, err)
	}
	werr := work()
	verdict := []byte{0}
	if werr != nil {
		verdict[0] = 1
	}
	ctx, cancel = context.WithTimeout(context.Background(), c.Timeout())
	defer cancel()
	all, err := bs.AllGather(ctx, verdict)
	if werr != nil {
		return fmt.Errorf("cudaexec: rank %d: %s: %w", rank, what, werr)
	}
	if err != nil {
		return fmt.Errorf("cudaexec: rank %d: waiting for the other ranks after %s: %w", rank, what, err)
	}
	var failed []string
	for q, v := range all {
		if len(v) != 1 || v[0] != 0 {
			failed = append(failed, fmt.Sprint(q))
		}
	}
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("cudaexec: rank %d: not launching: rank %s failed %s (its own error says why)", rank, failed[0], what)
	}
	return fmt.Errorf("cudaexec: rank %d: not launching: ranks %s failed %s (their own errors say why)", rank, strings.Join(failed, ", "), what)
}
