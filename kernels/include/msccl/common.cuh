// common.cuh: fixed-width types, PTX memory-ordering primitives, half and
// bfloat16 conversions, and the hang watchdog. Written without any CUDA
// header so that NVRTC 11.8 on a machine without the CUDA toolkit and
// NVRTC 13 on the GPU machine both compile it.
#pragma once
#include "abi.cuh"

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef short i16;
typedef unsigned long long u64;
typedef long long i64;

#define DEV static __device__ __forceinline__
// DEV_MEMBER is DEV for member functions, which cannot be static.
#define DEV_MEMBER __device__ __forceinline__

// ---- memory ordering (PTX memory model, system scope: peers may be other
// GPUs or the host proxy) ----

// Loads, stores and reduction-adds differ only in their ordering, scope and
// width, so each is one line of the table below; a line reads as the PTX
// instruction it emits ("ld." ORDER ".global." TYPE). C is the register
// constraint of the value: "l" for 64 bits, "r" for 32.
#define PTX_LD(name, T, order, ty, c)                                              \
  DEV T name(const T* p) {                                                         \
    T v;                                                                           \
    asm volatile("ld." order ".global." ty " %0, [%1];" : "=" c(v) : "l"(p) : "memory"); \
    return v;                                                                      \
  }
#define PTX_ST(name, T, order, ty, c) \
  DEV void name(T* p, T v) { asm volatile("st." order ".global." ty " [%0], %1;" ::"l"(p), c(v) : "memory"); }
#define PTX_RED_ADD(name, order) \
  DEV void name(u64* p, u64 v) { asm volatile("red." order ".global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }

PTX_LD(ld_acquire_sys, u64, "acquire.sys", "u64", "l")
PTX_LD(ld_relaxed_sys, u64, "relaxed.sys", "u64", "l")
PTX_LD(ld_acquire_gpu32, u32, "acquire.gpu", "u32", "r")
PTX_ST(st_release_gpu32, u32, "release.gpu", "u32", "r")
PTX_ST(st_relaxed_sys, u64, "relaxed.sys", "u64", "l")
// A release increment publishes every write this thread has observed
// (cumulativity), including those of its block ordered by bar.sync.
PTX_RED_ADD(red_release_sys_add, "release.sys")
PTX_RED_ADD(red_relaxed_sys_add, "relaxed.sys")
DEV void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
// GPU-scope forms of the signal primitives, for SIGNAL_SCOPE_GPU only
// (semaphore.cuh): they order nothing for another GPU or the host.
PTX_LD(ld_acquire_gpu64, u64, "acquire.gpu", "u64", "l")
PTX_LD(ld_relaxed_gpu64, u64, "relaxed.gpu", "u64", "l")
PTX_RED_ADD(red_release_gpu_add, "release.gpu")
PTX_RED_ADD(red_relaxed_gpu_add, "relaxed.gpu")
DEV void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
DEV void fence_sc_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }
DEV u32 atom_add_gpu32(u32* p, u32 v) {
  u32 old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
DEV u32 atom_cas_gpu32(u32* p, u32 cmp, u32 v) {
  u32 old;
  asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return old;
}
DEV u64 atom_add_gpu64(u64* p, u64 v) {
  u64 old;
  asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
DEV u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- element conversions: our own, since cuda_fp16.h is not available ----

DEV float f16_to_f32(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
DEV u16 f32_to_f16(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
DEV float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }
// Round to nearest even, NaN kept quiet with its sign: what cvt.rn.bf16.f32
// does on sm_80+, spelled out so that the kernel also builds for older arches.
DEV u16 f32_to_bf16(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
  u32 lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return (u16)(u >> 16);
}

// ---- watchdog ----

// Spin budget between reads of the global timer: reading it every spin
// slows the loop and the peers it competes with for memory.
#define WD_CHECK_EVERY 256

// One record per block, in mapped host memory, so the host can read it even
// while other blocks still spin. No atomics: each block writes only its own
// record (threads of one block that time out together write the same
// kind of facts; any of them is a faithful report), kind last, and only
// once: the executor never clears a record (it refuses to run after a hang).
struct WatchRecord {
  u32 kind;  // WD_* (abi.cuh); WD_NONE until the block times out
  u32 rank, block, op;
  u32 chanType, channel;
  i32 peer;
  u32 pad;
  u64 expected, seen;
};

struct WaitCtx {
  u64 deadline;  // absolute globaltimer ns; 0 = not armed yet
  u64 timeoutNs;
  WatchRecord* rec;  // this block's record
  u32 rank, block, op;
  volatile u32* aborted;  // shared memory: set once any thread of the block timed out
};

DEV void wd_arm(WaitCtx* w) { w->deadline = 0; }

// wd_expired is called every WD_CHECK_EVERY spins; true ends the wait.
DEV bool wd_stop(WaitCtx* w, u32* spins) {
  if (*w->aborted) return true;
  if ((++*spins & (WD_CHECK_EVERY - 1)) != 0) return false;
  u64 now = globaltimer();
  if (w->deadline == 0) {
    w->deadline = now + w->timeoutNs;
    return false;
  }
  return now > w->deadline;
}

DEV void wd_report(WaitCtx* w, u32 kind, u32 chanType, u32 channel, i32 peer, u64 expected, u64 seen) {
  if (*w->aborted) return;  // fell through because another thread already reported
  *w->aborted = 1;
  volatile WatchRecord* r = w->rec;
  // Keep the first report: launches queued behind a hang time out in turn
  // and would overwrite it with later token counts (expected 23, saw 2),
  // which reads as if the peer had fallen behind by twenty signals.
  if (r->kind != 0) return;
  r->rank = w->rank;
  r->block = w->block;
  r->op = w->op;
  r->chanType = chanType;
  r->channel = channel;
  r->peer = peer;
  r->expected = expected;
  r->seen = seen;
  fence_sc_sys();
  r->kind = kind;
  fence_sc_sys();
}
