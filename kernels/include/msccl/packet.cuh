// packet.cuh: LL packets, each 4-byte datum travelling with a 4-byte
// flag so that a reader needs no signal: it spins until the flag of the
// packet matches. LL16 carries two data words in one 16-byte store, LL8
// one in an 8-byte store; a packet buffer is twice its payload.
#pragma once
#include "common.cuh"

// LL16: {data0, flag, data1, flag} written with one 16-byte store.
DEV void pkt16_write(void* p, u32 d0, u32 d1, u32 flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag)
               : "memory");
}
DEV bool pkt16_read(const void* p, u32 flag, u32* d, WaitCtx* w) {
  u32 a, fa, b, fb, spins = 0;
  wd_arm(w);
  for (;;) {
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(fa), "=r"(b), "=r"(fb)
                 : "l"(p)
                 : "memory");
    if (fa == flag && fb == flag) break;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_PACKET, CHAN_NONE, 0, -1, flag, fa != flag ? fa : fb);
      return false;
    }
  }
  d[0] = a;
  d[1] = b;
  return true;
}
// LL8: {data, flag} written with one 8-byte store.
DEV void pkt8_write(void* p, u32 d0, u32 flag) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(d0), "r"(flag) : "memory");
}
DEV bool pkt8_read(const void* p, u32 flag, u32* d, WaitCtx* w) {
  u32 a, fa, spins = 0;
  wd_arm(w);
  for (;;) {
    asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(fa) : "l"(p) : "memory");
    if (fa == flag) break;
    if (wd_stop(w, &spins)) {
      wd_report(w, WD_PACKET, CHAN_NONE, 0, -1, flag, fa);
      return false;
    }
  }
  d[0] = a;
  return true;
}

// pkt_write and pkt_read move the NW = PK/8 data words of one packet of
// either width; the executor's packet ops and the reference kernels both
// go through them, so both use the same stores and watchdog.
template <int PK>
DEV void pkt_write(void* p, const u32* v, u32 flag) {
  if (PK == 16) {
    pkt16_write(p, v[0], v[1], flag);
  } else {
    pkt8_write(p, v[0], flag);
  }
}
template <int PK>
DEV bool pkt_read(const void* p, u32 flag, u32* v, WaitCtx* w) {
  if (PK == 16) return pkt16_read(p, flag, v, w);
  return pkt8_read(p, flag, v, w);
}

// pkt_copy moves one whole packet (data and flags) with one store.
template <int PK>
DEV void pkt_copy(char* d, const char* s) {
  u32 a, b, c, f;
  if (PK == 16) {
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(f) : "l"(s) : "memory");
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(d), "r"(a), "r"(b), "r"(c), "r"(f) : "memory");
  } else {
    asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(b) : "l"(s) : "memory");
    asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(d), "r"(a), "r"(b) : "memory");
  }
}

// pack_packets writes n payload bytes of s as packets at d (n/(PK/2)
// packets), threads t, t+nt, ... of a group of nt each taking every nt-th.
template <int PK>
DEV void pack_packets(char* d, const char* s, u32 n, u32 flag, u32 t, u32 nt) {
  const u32 P = PK / 2, NW = P / 4;
  for (u32 i = t; i < n / P; i += nt) {
    u32 v[2];
    for (u32 j = 0; j < NW; j++) v[j] = ((const u32*)s)[i * NW + j];
    pkt_write<PK>(d + (u64)i * PK, v, flag);
  }
}

// MOVE_PACKETS waits for the packets at S (N payload bytes, threads T,
// T+NT, ... of a group each taking every NT-th) and either forwards each
// to D as a packet (FORWARD) or stores its payload at D. A macro, not a
// function: the executor's op_unpack expands it in place, which keeps its
// PTX the bytes it was before the primitives moved here (as a function,
// inlined, it renumbered two virtual registers, and ptxas then emitted
// other SASS).
#define MOVE_PACKETS(PK, D, S, N, FLAG, FORWARD, W, T, NT)                 \
  do {                                                                    \
    const u32 P_ = (PK) / 2, NW_ = P_ / 4;                                \
    for (u32 i = (T); i < (N) / P_; i += (NT)) {                          \
      u32 v[2];                                                           \
      pkt_read<PK>((S) + (u64)i * (PK), FLAG, v, W);                      \
      if (FORWARD) {                                                      \
        pkt_write<PK>((D) + (u64)i * (PK), v, FLAG);                      \
      } else {                                                            \
        for (u32 j = 0; j < NW_; j++) ((u32*)(D))[i * NW_ + j] = v[j];    \
      }                                                                   \
    }                                                                     \
  } while (0)

namespace msccl {

// The packet types, for a user kernel's template arguments
// (MemoryChannel::putPackets<LL16Packet>): Size is the bytes of one packet,
// Payload the data bytes it carries.
struct LL16Packet {
  u32 data1, flag1, data2, flag2;
  enum { Size = 16, Payload = 8 };
};
struct LL8Packet {
  u32 data, flag;
  enum { Size = 8, Payload = 4 };
};

}  // namespace msccl
