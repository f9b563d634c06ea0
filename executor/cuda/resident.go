package cudaexec

import "github.com/msccl-go/msccl-go/internal/diag"

// checkResident refuses a binding whose thread blocks cannot all be
// resident on the device at once. Blocks of every rank spin on each
// other's signals and packets, so a block left waiting for a free
// multiprocessor behind spinning ones never starts and the collective
// hangs until the watchdog fires (upstream's 8-rank alltoall ring plans:
// 32 blocks of 1024 threads per rank, 256 blocks on an H200 that holds
// 132 of them). Every rank of the plan runs on device 0, so the budget is
// shared by all of them.
func (e *Executor) checkResident(fn *fnEntry, b *binding) error {
	per, err := fn.fn.MaxActiveBlocksPerSM(int(b.threads), int(b.smem))
	if err != nil {
		return err
	}
	total := 0
	for _, rs := range e.ranks {
		total += rs.nblocks
	}
	return residentError(e.p.Name, len(e.ranks), total, int(b.threads), int(b.smem), per, e.sms)
}

// residentError is checkResident's arithmetic, apart so it can be tested
// without a GPU.
func residentError(plan string, ranks, blocks, threads, smem, perSM, sms int) error {
	if capacity := perSM * sms; blocks > capacity {
		return diag.Errorc(diag.CodeNotResident, "cudaexec: plan %q needs all %d thread blocks of its %d ranks resident at once (they wait on each other), "+
			"but device 0 holds at most %d blocks of %d threads with %d bytes of op table (%d per multiprocessor × %d multiprocessors); "+
			"use fewer blocks (instances, tb), fewer threads per block (option threads_per_block), or fewer ranks per device",
			plan, blocks, ranks, capacity, threads, smem, perSM, sms)
	}
	return nil
}
