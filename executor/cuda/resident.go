package cudaexec

import (
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// checkResident refuses a binding whose thread blocks cannot all be
// resident at once. Blocks of every rank spin on each other's signals and
// packets, so a block left waiting for a free multiprocessor behind
// spinning ones never starts and the collective hangs until the watchdog
// fires (upstream's 8-rank alltoall ring plans: 32 blocks of 1024 threads
// per rank, 256 blocks on an H200 that holds 132 of them). The ranks of
// one device share its budget: all of them on the default path (device
// 0), each device's own with Options.Devices.
func (e *Executor) checkResident(b *binding) error {
	if e.devs == nil {
		return e.residentOn(int(e.dev), e.sms, b.fn, b, nil)
	}
	seen := map[int]bool{}
	for r, dev := range e.devs.of {
		if seen[dev] {
			continue
		}
		seen[dev] = true
		if err := e.residentOn(dev, e.devs.sms[dev], b.rfn[r], b, e.devs.ctx[dev]); err != nil {
			return err
		}
	}
	return nil
}

// residentOn checks the ranks on device dev (every rank when ctx is nil,
// the default path) against its multiprocessors.
func (e *Executor) residentOn(dev, sms int, fn *fnEntry, b *binding, ctx *cuda.Context) error {
	var per int
	occupancy := func() (err error) { per, err = fn.fn.MaxActiveBlocksPerSM(int(b.threads), int(b.smem)); return err }
	if err := doIn(ctx, occupancy); err != nil {
		return err
	}
	ranks, total := 0, 0
	for r, rs := range e.ranks {
		if ctx == nil || e.devs.of[r] == dev {
			ranks++
			total += rs.nblocks
		}
	}
	return residentError(e.p.Name, dev, ranks, total, int(b.threads), int(b.smem), per, sms)
}

// residentError is checkResident's arithmetic, apart so it can be tested
// without a GPU.
func residentError(plan string, dev, ranks, blocks, threads, smem, perSM, sms int) error {
	if capacity := perSM * sms; blocks > capacity {
		return diag.Errorc(diag.CodeNotResident, "cudaexec: plan %q needs all %d thread blocks of its %d ranks resident at once (they wait on each other), "+
			"but device %d holds at most %d blocks of %d threads with %d bytes of op table (%d per multiprocessor × %d multiprocessors); "+
			"use fewer blocks (instances, tb), fewer threads per block (option threads_per_block), or fewer ranks per device",
			plan, blocks, ranks, dev, capacity, threads, smem, perSM, sms)
	}
	return nil
}
