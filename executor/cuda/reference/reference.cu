// reference.cu: hand-written, specialised kernels for three collectives
// of the library, for measuring the generic executor kernel against
// (issue 17). No interpretation: each kernel is the collective's loop nest
// written out. They run exactly as the executor runs a plan (one kernel
// per rank on the rank's stream, the plan's grid and block size, the same
// buffers) and reduce in the plan's order (own chunk, then peers in rank
// order, accumulated in f32 and rounded once), so that msccl-bench -c
// checks them against the CPU executor's result for the plan.
//
// Before this file come the device headers of package kernels and its
// reduce.cuh (kernels.Primitives: codes, PTX primitives, Acc, LL packets,
// watchdog).

#define REF_MAX_RANKS 32

// RefArgs is one rank's argument block (executor/cuda/reference Args).
struct RefArgs {
  u64 in[REF_MAX_RANKS];       // every rank's input buffer
  u64 out[REF_MAX_RANKS];      // every rank's output buffer
  u64 scratch[REF_MAX_RANKS];  // every rank's scratch (the reference's own)
  u64 arrive[REF_MAX_RANKS];   // every rank's arrival counters, u64[2]
  u64 epoch;                   // u64*: launches this rank completed
  u64 done;                    // u32*: blocks of this launch finished
  u64 watch;                   // WatchRecord*: one per block
  u64 chunk;                   // bytes: one rank's chunk (allreduce), the input (allgather)
  u64 scratchHalf;             // bytes between the LL scratch halves
  u64 timeoutNs;
  u32 rank, nranks, red, pad;
};

// RefCtx is what every kernel sets up first (REF_KERNEL, below).
struct RefCtx {
  u64 epoch;
  WaitCtx w;
  u64 gt, gs;  // this thread's index in the grid, and the grid's size
};

DEV void ref_enter(const RefArgs* a, RefCtx* c, u64* sEpoch, u32* sAborted) {
  if (threadIdx.x == 0) {
    // Written by the previous launch's last block, which finished before
    // this launch started (same stream).
    *sEpoch = *(volatile u64*)a->epoch;
    *sAborted = 0;
  }
  __syncthreads();
  c->epoch = *sEpoch;
  c->w.timeoutNs = a->timeoutNs;
  c->w.rec = (WatchRecord*)a->watch + blockIdx.x;
  c->w.rank = a->rank;
  c->w.block = blockIdx.x;
  c->w.op = 0;
  c->w.aborted = sAborted;
  c->gt = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  c->gs = (u64)gridDim.x * blockDim.x;
}

// ref_exit counts the launch: the last block to finish advances the epoch.
DEV void ref_exit(const RefArgs* a, const RefCtx* c) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    u32* done = (u32*)a->done;
    if (atom_add_gpu32(done, 1) == gridDim.x - 1) {
      *done = 0;
      *(volatile u64*)a->epoch = c->epoch + 1;
      __threadfence();
    }
  }
}

// ref_arrive tells every peer that this block's writes of phase ph are
// done (a release increment, as a memory channel's signal).
DEV void ref_arrive(const RefArgs* a, u32 ph) {
  __syncthreads();
  if (threadIdx.x == 0) {
    fence_acq_rel_sys();
    for (u32 p = 0; p < a->nranks; p++) {
      if (p != a->rank) red_release_sys_add((u64*)a->arrive[p] + ph, 1);
    }
  }
}

// ref_await waits until every block of every peer arrived at phase ph in
// this launch (counters grow across launches: the target is cumulative).
DEV void ref_await(const RefArgs* a, RefCtx* c, u32 ph) {
  if (threadIdx.x == 0) {
    const u64* ctr = (const u64*)a->arrive[a->rank] + ph;
    u64 want = (c->epoch + 1) * (u64)(a->nranks - 1) * gridDim.x;
    u32 spins = 0;
    c->w.op = ph;
    wd_arm(&c->w);
    for (;;) {
      u64 seen = ld_acquire_sys(ctr);
      if (seen >= want) break;
      if (wd_stop(&c->w, &spins)) {
        wd_report(&c->w, WD_SIGNAL, CHAN_MEMORY, ph, -1, want, seen);
        break;
      }
    }
  }
  __syncthreads();
}

// ref_copy16 copies n 16-byte words, four loads in flight per thread
// before the stores (one at a time leaves NVLink latency uncovered).
DEV void ref_copy16(int4* dst, const int4* src, u64 n, u64 gt, u64 gs) {
  u64 i = gt;
  for (; i + 3 * gs < n; i += 4 * gs) {
    int4 a = src[i], b = src[i + gs], c = src[i + 2 * gs], d = src[i + 3 * gs];
    dst[i] = a;
    dst[i + gs] = b;
    dst[i + 2 * gs] = c;
    dst[i + 3 * gs] = d;
  }
  for (; i < n; i += gs) dst[i] = src[i];
}

// ---- direct allgather: every rank writes its input into slot rank of
// every output (its own first), then waits for everyone's writes ----

DEV void ref_allgather_direct(const RefArgs* a, RefCtx& c) {
  const u32 n = a->nranks, r = a->rank;
  const u64 words = a->chunk / 16;
  const int4* src = (const int4*)a->in[r];
  for (u32 k = 0; k < n; k++) {
    u32 p = (r + k) % n;  // peers staggered so that no rank is everyone's first target
    int4* dst = (int4*)(a->out[p] + (u64)r * a->chunk);
    if ((const int4*)dst != src) ref_copy16(dst, src, words, c.gt, c.gs);
  }
  ref_arrive(a, 0);
  ref_await(a, &c, 0);
}

// ---- two-shot allreduce (Simple): chunk p of every rank into slot rank of
// rank p's scratch; rank p reduces its chunk and writes the result into
// every rank's buffer ----

// RB is how many sources are loaded before any is reduced: enough 16-byte
// loads in flight to cover NVLink latency, few enough to stay in the 64
// registers __launch_bounds__(1024, 1) leaves (FP8 widens 16 lanes per
// word: 8 in flight spilled there, by ptxas -v for sm_80).
#define RB 8
#define RB_F8 4

template <int DT>
DEV void ref_allreduce_twoshot(const RefArgs* a, RefCtx& c) {
  const u32 n = a->nranks, r = a->rank;
  const u64 chunk = a->chunk, words = chunk / 16;
  const int4* in = (const int4*)a->in[r];
  for (u32 k = 1; k < n; k++) {
    u32 p = (r + k) % n;
    ref_copy16((int4*)(a->scratch[p] + (u64)r * chunk), in + (u64)p * words, words, c.gt, c.gs);
  }
  ref_arrive(a, 0);
  ref_await(a, &c, 0);
  const char* scr = (const char*)a->scratch[r];
  const int NB = IS_F8(DT) ? RB_F8 : RB;
  for (u64 i = c.gt; i < words; i += c.gs) {
    Acc<DT, 4> acc;
    int4 v = in[(u64)r * words + i];
    acc_init<DT, 4>(acc, (const u32*)&v);
    for (u32 s0 = 0; s0 + 1 < n; s0 += NB) {
      int4 buf[NB];
#pragma unroll
      for (int j = 0; j < NB; j++) {
        u32 s = s0 + j, p = s < r ? s : s + 1;  // peers in rank order, skipping r
        if (s + 1 < n) buf[j] = ((const int4*)(scr + (u64)p * chunk))[i];
      }
#pragma unroll
      for (int j = 0; j < NB; j++) {
        if (s0 + j + 1 < n) acc_add<DT, 4>(acc, (const u32*)&buf[j], a->red);
      }
    }
    acc_out<DT, 4>(acc, (u32*)&v);
    for (u32 k = 0; k < n; k++) {
      u32 p = (r + k) % n;
      ((int4*)a->out[p])[(u64)r * words + i] = v;
    }
  }
  ref_arrive(a, 1);
  ref_await(a, &c, 1);
}

// ---- one-shot allreduce with LL packets: chunk p of every rank goes as
// packets into slot rank of rank p's scratch; rank p reduces as they
// arrive and sends the result as packets into slot n+p of every scratch;
// everyone unpacks. Packet flags are the only synchronisation. ----

template <int PK>
DEV void ref_pkt_load(const void* p, u32* d, u32* f) {
  if (PK == 16) {
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(d[0]), "=r"(f[0]), "=r"(d[1]), "=r"(f[1])
                 : "l"(p)
                 : "memory");
  } else {
    asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(d[0]), "=r"(f[0]) : "l"(p) : "memory");
    f[1] = f[0];
  }
}

template <int DT, int PK>
DEV void ref_allreduce_oneshot_ll(const RefArgs* a, RefCtx& c) {
  const u32 P = PK / 2, NW = P / 4;  // payload bytes and words per packet
  const u32 n = a->nranks, r = a->rank;
  const u64 chunk = a->chunk, npk = chunk / P, slot = 2 * chunk;
  const u64 half = (c.epoch & 1) * a->scratchHalf;
  const u32 flag = (u32)(c.epoch % 0xffffffffull) + 1;
  const u32* in = (const u32*)a->in[r];
  // 1. Pack chunk p into slot r of rank p's scratch.
  for (u32 k = 1; k < n; k++) {
    u32 p = (r + k) % n;
    char* dst = (char*)(a->scratch[p] + half + (u64)r * slot);
    const u32* src = in + (u64)p * chunk / 4;
    for (u64 i = c.gt; i < npk; i += c.gs) pkt_write<PK>(dst + i * PK, src + i * NW, flag);
  }
  // 2. Reduce chunk r: load every peer's packet, then wait only for those
  // whose flag was not there yet.
  const char* mine = (const char*)(a->scratch[r] + half);
  u32* out = (u32*)a->out[r];
  for (u64 i = c.gt; i < npk; i += c.gs) {
    Acc<DT, NW> acc;
    u32 v[2];
    for (u32 j = 0; j < NW; j++) v[j] = in[(u64)r * chunk / 4 + i * NW + j];
    acc_init<DT, NW>(acc, v);
    for (u32 s0 = 0; s0 + 1 < n; s0 += RB) {
      u32 d[RB][2], f[RB][2];
#pragma unroll
      for (int j = 0; j < RB; j++) {
        u32 s = s0 + j, p = s < r ? s : s + 1;
        if (s + 1 < n) ref_pkt_load<PK>(mine + (u64)p * slot + i * PK, d[j], f[j]);
      }
#pragma unroll
      for (int j = 0; j < RB; j++) {
        u32 s = s0 + j, p = s < r ? s : s + 1;
        if (s + 1 >= n) continue;
        if (f[j][0] != flag || f[j][1] != flag) pkt_read<PK>(mine + (u64)p * slot + i * PK, flag, d[j], &c.w);
        acc_add<DT, NW>(acc, d[j], a->red);
      }
    }
    acc_out<DT, NW>(acc, v);
    for (u32 j = 0; j < NW; j++) out[(u64)r * chunk / 4 + i * NW + j] = v[j];
    for (u32 k = 1; k < n; k++) {
      u32 p = (r + k) % n;
      pkt_write<PK>((char*)(a->scratch[p] + half + (u64)(n + r) * slot) + i * PK, v, flag);
    }
  }
  // 3. Unpack everyone's reduced chunk.
  for (u32 k = 1; k < n; k++) {
    u32 p = (r + k) % n;
    const char* src = mine + (u64)(n + p) * slot;
    for (u64 i = c.gt; i < npk; i += c.gs) {
      u32 v[2];
      pkt_read<PK>(src + i * PK, flag, v, &c.w);
      for (u32 j = 0; j < NW; j++) out[(u64)p * chunk / 4 + i * NW + j] = v[j];
    }
  }
}

// The instance (one kernel, data type and packet width per module) is
// appended by reference.Source.
// The entry point owns the launch's bookkeeping (ref_enter before the body,
// ref_exit after it), so a body is only its collective.
#define REF_KERNEL(name, body)                                                    \
  extern "C" __global__ void __launch_bounds__(1024, 1) name(const RefArgs* a) { \
    __shared__ u64 sEpoch;                                                        \
    __shared__ u32 sAborted;                                                      \
    RefCtx c;                                                                     \
    ref_enter(a, &c, &sEpoch, &sAborted);                                         \
    body(a, c);                                                                   \
    ref_exit(a, &c);                                                              \
  }
