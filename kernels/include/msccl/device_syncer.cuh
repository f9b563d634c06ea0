// device_syncer.cuh: a barrier among the blocks of one rank (all of a
// grid, or a group of them), and msccl::DeviceSyncer, the grid-wide
// barrier a user kernel holds. Every block of the group must be resident
// at once (a cooperative launch, or no more blocks than the GPU runs
// together), else the barrier waits for blocks that cannot start and the
// watchdog ends it.
#pragma once
#include "semaphore.cuh"

struct BlockBarrier {
  u32 count;
  u32 gen;
};

DEV void block_barrier(BlockBarrier* b, u32 n, u32 id, WaitCtx* w) {
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 gen = ld_acquire_gpu32(&b->gen);
    __threadfence();
    u32 arrived = atom_add_gpu32(&b->count, 1);
    if (arrived == n - 1) {
      b->count = 0;
      st_release_gpu32(&b->gen, gen + 1);
    } else {
      u32 spins = 0;
      wd_arm(w);
      while (ld_acquire_gpu32(&b->gen) == gen) {
        if (wd_stop(w, &spins)) {
          wd_report(w, WD_BARRIER, CHAN_NONE, id, -1, n, arrived + 1);
          break;
        }
      }
    }
  }
  __syncthreads();
}

namespace msccl {

// DeviceSyncer is a grid barrier in device memory, zeroed before its first
// use and reusable across launches (its generation only grows). sync is
// called by every thread of every block: writes before it in any block
// are visible after it in every block (GPU scope).
struct DeviceSyncer {
  BlockBarrier b;
  DEV_MEMBER void sync(u32 nblocks, const Watch& watch) {
    WaitScope s(watch);
    block_barrier(&b, nblocks, 0, &s.w);
  }
};

}  // namespace msccl
