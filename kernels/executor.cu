// executor.cu: the generic executor kernel. Each block copies its op table
// into shared memory and interprets it, calling the same device primitives
// (kernels/include/msccl) a user's kernel calls. The codes it uses (OP_*,
// CHAN_*, DT_*, RED_*, REF_*, FIFO_*, WD_*, MAXR) come from the generated
// abi.cuh, and abi_check.cuh asserts its structs against
// kernels/layout.go (see kernels/abi.go).
#include "msccl/msccl.cuh"
#include "reduce.cuh"

// DRef is one resolved buffer reference: the byte address of the range's
// start for this block (tbg_info applied; packet buffers at twice the
// payload offset) and its payload size.
struct DRef {
  u64 ptr;
  u32 size;
  u16 flags;  // REF_SCRATCH: add the launch's scratch half; REF_PACKET: holds LL packets
  i16 peer;   // owning rank of a remote buffer, -1 when local
};

// DOp is one op; its refs are refs[ref0 .. ref0+nsrc+ndst) (sources first)
// and its channel or semaphore ids idx[idx0 .. idx0+nidx).
struct DOp {
  u8 code, nsrc, ndst, nidx;
  u8 reduce, chanType, npipe, pad0;
  u16 ref0, idx0;
  u16 barrier, numTBs;
  u32 unit, niter;
  u32 pad1, pad2;
};

struct TableHeader {
  u32 nops, nrefs, nidx, bytes;
};

struct Args {
  const u8* tables;       // every block's table, concatenated, 16-byte aligned
  const u32* tableOff;    // byte offset of block b's table
  MemChan* mem;           // memory channels of this rank, in plan order
  MemChan* port;          // port channels of this rank, in plan order
  u32* sems;              // semaphores
  BlockBarrier* barriers; // by barrier id
  Fifo fifo;
  u64* epoch;             // launches completed by this rank
  u32* done;              // blocks finished in the current launch
  WatchRecord* wd;        // one record per block, mapped host memory
  u64 scratchHalf;        // bytes between the scratch halves (0: single scratch)
  u64 timeoutNs;
  u32 rank, nblocks;
  u8* trace;              // MSCCL_TRACE instances: per block a TraceHeader and traceCap records
  u32 traceCap, pad;
};

// StageSpan is one staging copy the _stage instance makes itself: n
// bytes from src to dst, device addresses of this process (the caller's
// buffer on one side, the rank's registered buffer on the other).
struct StageSpan {
  u64 dst, src, n;
};

// Stage is a launch's staging, the _stage instance's second parameter,
// passed by value: a captured graph's kernel node keeps it, and a launch
// needs no upload. The prologue copies the nin input spans, the epilogue
// the nout output spans (executor/cuda kstage.go decides which spans, if
// any, the kernel copies); with both counts 0 the launch does what the
// plain instance does. grid is the rank's grid barrier: a generation
// counter that only grows (block_barrier), so it needs no reset between
// launches or graph replays.
struct Stage {
  BlockBarrier* grid;
  u32 nin, nout;
  StageSpan in[STAGE_SPANS];
  StageSpan out[STAGE_SPANS];
};

// The GPU timeline (kernels.TraceHeader, kernels.TraceRecord): the
// instance compiled with MSCCL_TRACE records every op it runs, from
// %globaltimer, into a buffer the host preallocated; the others do not
// contain the code at all.
struct TraceHeader {
  u32 count;   // records this launch wanted (more than traceCap: the rest were dropped)
  u32 pad;
  u64 launch;  // the rank's epoch of the launch recorded
};
struct TraceRecord {
  u64 start, end;  // globaltimer ns; end after the block's closing barrier
  u32 op;          // index in the block's op table
  u32 iter;        // pipeline window (0 outside a pipeline)
};

#ifdef MSCCL_TRACE
DEV TraceHeader* trace_header(const Args* a, u32 b) {
  return (TraceHeader*)(a->trace + (u64)b * (sizeof(TraceHeader) + (u64)a->traceCap * sizeof(TraceRecord)));
}
// trace_op closes op i's record: a block barrier, so that end is when
// the whole block is done with it, then thread 0 writes.
DEV void trace_op(const Args* a, TraceHeader* th, u64 t0, u32 op, u32 iter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 k = th->count++;
    if (k < a->traceCap) {
      TraceRecord* r = (TraceRecord*)(th + 1) + k;
      r->start = t0;
      r->end = globaltimer();
      r->op = op;
      r->iter = iter;
    }
  }
}
#define TRACE_T0 (threadIdx.x == 0 ? globaltimer() : 0)
#endif

struct Env {
  const DRef* refs;
  const u16* idx;
  const Args* a;
  u64 half;  // scratch half offset of this launch
  u32 flag;  // LL flag of this launch
  WaitCtx w;
};

struct Span {
  char* p;
  u32 n;  // payload bytes
};

// span resolves ref i for the pipeline window [off, off+unit).
DEV Span span(const Env& e, const DRef& r, u32 off, u32 unit) {
  Span s;
  u64 base = r.ptr + ((r.flags & REF_SCRATCH) ? e.half : 0);
  if (off >= r.size) {
    s.p = (char*)base;
    s.n = 0;
    return s;
  }
  s.p = (char*)(base + ((r.flags & REF_PACKET) ? 2ull * off : off));
  u32 left = r.size - off;
  s.n = left < unit ? left : unit;
  return s;
}

// ---- Simple protocol: put, get, copy, and the reductions ----

DEV void op_put_mem(const Env& e, const DOp& op, u32 off, u32 unit) {
  for (int k = 0; k < op.ndst && k < op.nsrc; k++) {
    Span s = span(e, e.refs[op.ref0 + k], off, unit);
    Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    copy_bytes(d.p, s.p, d.n < s.n ? d.n : s.n);
  }
}

// port_sm: this launch moves port channels' bytes with its own threads
// (executor/cuda PortCopySM: no FIFO was given). A put is then complete
// when its op ends, a flush has nothing to wait for, and a signal is a
// memory channel's signal to the peer's inbound word in device memory.
// No copy engine and no host thread is involved, so nothing can queue the
// copy behind a stream waiting for these kernels (CUDA_DEVICE_MAX_CONNECTIONS=1).
DEV bool port_sm(const Env& e) { return e.a->fifo.entries == nullptr; }

// port_fifo: with a FIFO, a port channel whose peer's semaphore is not
// mapped here (remoteInbound null) goes through the host proxy: the peer
// is on another node (executor/cuda netproxy.go, the socket transport),
// or every port channel does (PortCopyProxy leaves them all null). One
// whose peer's word is mapped is still copied by SMs, so a plan's
// same-node port channels run as they do without a FIFO.
DEV bool port_fifo(const Env& e, const MemChan& c) { return !port_sm(e) && c.remoteInbound == nullptr; }

// port_sm_signal: after the block's copies (the __syncthreads orders every
// thread's stores before the signalling thread's release fence).
DEV void port_sm_signal(const Env& e, const DOp& op) {
  __syncthreads();
  u32 k = threadIdx.x;
  if (k < op.ndst && k < op.nidx) chan_signal(e.a->port[e.idx[op.idx0 + k]], false);
}

// Port puts are issued by one thread per destination; the proxy copies in
// FIFO order, so a signal pushed after them arrives after the data.
DEV void op_put_port(Env& e, const DOp& op, u32 off, u32 unit, bool withSignal, bool withFlush) {
  if (port_sm(e)) {
    op_put_mem(e, op, off, unit);
    if (withSignal) port_sm_signal(e, op);
    return;
  }
  // A FIFO: each destination goes its channel's way (port_fifo). The
  // SM-copied ones first, by every thread; the decision is the same in
  // every thread, so the barrier before their signals is uniform.
  bool sm = false;
  for (int k = 0; k < op.ndst && k < op.nsrc && k < op.nidx; k++) {
    if (port_fifo(e, e.a->port[e.idx[op.idx0 + k]])) continue;
    sm = true;
    Span s = span(e, e.refs[op.ref0 + k], off, unit);
    Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    copy_bytes(d.p, s.p, d.n < s.n ? d.n : s.n);
  }
  if (sm && withSignal) __syncthreads();
  u32 k = threadIdx.x;
  if (k >= op.ndst || k >= op.nidx) return;
  const MemChan& c = e.a->port[e.idx[op.idx0 + k]];
  if (!port_fifo(e, c)) {
    if (withSignal) chan_signal(c, false);
    return;
  }
  Span s = span(e, e.refs[op.ref0 + k], off, unit);
  Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
  u32 n = d.n < s.n ? d.n : s.n;
  if (n > 0) fifo_push(e.a->fifo, FIFO_PUT, c.index, (u64)s.p, (u64)d.p, n, &e.w);
  if (withSignal) fifo_push(e.a->fifo, FIFO_SIGNAL, c.index, 0, 0, 0, &e.w);
  if (withFlush) fifo_flush(e.a->fifo, c.index, &e.w);
}

// op_reduce covers re, res, rre and rres: dst[0] = reduce(src...) and the
// result is also written to dst[1..] (remote for res/rres). Sources are
// combined in plan order, accumulated in f32 and rounded once (reduce.cuh),
// whatever the batching below: the result is bit for bit the CPU
// executor's.

// RED_BATCH is how many sources' 16-byte words one thread loads before it
// reduces any of them (as executor/cuda/reference's two-shot): a load-then-add
// chain per source leaves one load in flight per thread, which one block
// cannot turn into bandwidth. The register budget decides the width:
// __launch_bounds__(1024, 1) leaves 64 per thread, and ptxas -v for sm_90
// (TestReduceNoSpill) shows op_reduce spilling at 6 int4 in flight (f16)
// and 4 (FP8, whose words widen to 16 f32 lanes) but not at 4 and 2. The
// sources past the first batch are prefetched into L2 before it is
// reduced (prefetch needs no register), so their loads hit L2. Both are
// overridable for measurements (MSCCL_KERNEL_DEFINES).
#ifndef RED_BATCH
#define RED_BATCH 4
#endif
#ifndef RED_BATCH_F8
#define RED_BATCH_F8 2
#endif

DEV void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// The reductions read their operands' addresses from shared memory (one
// copy per block: every thread of the block has the same ones). Per-thread
// arrays indexed by a run-time source number live in local memory, which
// costs an 8-byte load per source and destination per 16-byte word, as
// much traffic as the data itself once 1024 threads' copies no longer fit
// in L1. RED_LOCAL_SPANS=1 keeps the per-thread arrays, to measure.
#ifndef RED_LOCAL_SPANS
#define RED_LOCAL_SPANS 0
#endif

// at is operand k's address, from either form.
DEV char* at(char* const* s, int k) { return s[k]; }
#if RED_LOCAL_SPANS
DEV char* at(const Span* s, int k) { return s[k].p; }
#endif

template <int DT, typename P>
DEV void reduce_words16(const DOp& op, P s, int ns, P d, int nd, u32 n) {
  const int NB = IS_F8(DT) ? RED_BATCH_F8 : RED_BATCH;
  for (u32 i = threadIdx.x; i < n / 16; i += blockDim.x) {
    Acc<DT, 4> acc;
    for (int k = NB; k < ns; k++) prefetch_l2((const int4*)at(s, k) + i);
    for (int k0 = 0; k0 < ns; k0 += NB) {
      int4 buf[NB];
#pragma unroll
      for (int j = 0; j < NB; j++) {
        if (k0 + j < ns) buf[j] = ((const int4*)at(s, k0 + j))[i];
      }
#pragma unroll
      for (int j = 0; j < NB; j++) {
        if (k0 + j >= ns) break;
        if (j == 0 && k0 == 0) {
          acc_init<DT, 4>(acc, (const u32*)&buf[0]);
        } else {
          acc_add<DT, 4>(acc, (const u32*)&buf[j], op.reduce);
        }
      }
    }
    int4 v;
    acc_out<DT, 4>(acc, (u32*)&v);
    for (int k = 0; k < nd; k++) ((int4*)at(d, k))[i] = v;
  }
}

// reduce_words4 is the path for ranges that are not 16-byte aligned: one
// 32-bit word per thread and trip.
template <int DT, typename P>
DEV void reduce_words4(const DOp& op, P s, int ns, P d, int nd, u32 n) {
  for (u32 i = threadIdx.x; i < n / 4; i += blockDim.x) {
    u32 v = ((const u32*)at(s, 0))[i];
    Acc<DT, 1> acc;
    acc_init<DT, 1>(acc, &v);
    for (int k = 1; k < ns; k++) {
      v = ((const u32*)at(s, k))[i];
      acc_add<DT, 1>(acc, &v, op.reduce);
    }
    acc_out<DT, 1>(acc, &v);
    for (int k = 0; k < nd; k++) ((u32*)at(d, k))[i] = v;
  }
}

template <int DT>
static __device__ __noinline__ void op_reduce(const Env& e, const DOp& op, u32 off, u32 unit) {
  Span s[MAXR], d[MAXR];
  int ns = op.nsrc < MAXR ? op.nsrc : MAXR, nd = op.ndst < MAXR ? op.ndst : MAXR;
  u64 any = 0;
  u32 n = 0xffffffffu;
  for (int k = 0; k < ns; k++) {
    s[k] = span(e, e.refs[op.ref0 + k], off, unit);
    any |= (u64)s[k].p;
    n = s[k].n < n ? s[k].n : n;
  }
  for (int k = 0; k < nd; k++) {
    d[k] = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    any |= (u64)d[k].p;
    n = d[k].n < n ? d[k].n : n;
  }
  // n is the same in every thread of the block, so this return and the
  // barriers below are uniform.
  if (n == 0 || n == 0xffffffffu) return;
  bool w16 = ((any | n) & 15) == 0;
#if RED_LOCAL_SPANS
  if (w16) {
    reduce_words16<DT>(op, (const Span*)s, ns, (const Span*)d, nd, n);
  } else {
    reduce_words4<DT>(op, (const Span*)s, ns, (const Span*)d, nd, n);
  }
#else
  __shared__ char* p[2 * MAXR];
  __syncthreads();  // the block's previous reduction may still read p
  u32 t = threadIdx.x;
  if (t < (u32)ns) p[t] = s[t].p;
  if (t >= MAXR && t < (u32)(MAXR + nd)) p[t] = d[t - MAXR].p;
  __syncthreads();
  if (w16) {
    reduce_words16<DT>(op, (char* const*)p, ns, (char* const*)p + MAXR, nd, n);
  } else {
    reduce_words4<DT>(op, (char* const*)p, ns, (char* const*)p + MAXR, nd, n);
  }
#endif
}

// ---- LL packet ops ----

// ppkt (memory) and cpkt: pack src[k] into packet dst[k].
template <int PK>
DEV void op_pack(const Env& e, const DOp& op, u32 off, u32 unit) {
  for (int k = 0; k < op.ndst && k < op.nsrc; k++) {
    Span s = span(e, e.refs[op.ref0 + k], off, unit);
    Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    pack_packets<PK>(d.p, s.p, d.n < s.n ? d.n : s.n, e.flag, threadIdx.x, blockDim.x);
  }
}

// upkt: wait for packets of src[0] and store their payload into dst[0].
// rppkt (memory): wait for packets of src[k] and forward them to dst[k];
// with one src and several dsts (upstream's form, ir.OpInfo.FanOut),
// read each packet of src[0] once and forward it to every dst.
template <int PK>
DEV void op_unpack(Env& e, const DOp& op, u32 off, u32 unit, bool forward) {
  const u32 P = PK / 2;
  if (forward && op.nsrc == 1 && op.ndst > 1) {
    Span s = span(e, e.refs[op.ref0], off, unit);
    Span d[MAXR];
    int nd = op.ndst < MAXR ? op.ndst : MAXR;
    u32 n = s.n;
    for (int k = 0; k < nd; k++) {
      d[k] = span(e, e.refs[op.ref0 + 1 + k], off, unit);
      n = d[k].n < n ? d[k].n : n;
    }
    for (u32 i = threadIdx.x; i < n / P; i += blockDim.x) {
      u32 v[2];
      pkt_read<PK>(s.p + (u64)i * PK, e.flag, v, &e.w);
      for (int k = 0; k < nd; k++) pkt_write<PK>(d[k].p + (u64)i * PK, v, e.flag);
    }
    return;
  }
  for (int k = 0; k < op.ndst && k < op.nsrc; k++) {
    Span s = span(e, e.refs[op.ref0 + k], off, unit);
    Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    u32 n = d.n < s.n ? d.n : s.n;
    MOVE_PACKETS(PK, d.p, s.p, n, e.flag, forward, &e.w, threadIdx.x, blockDim.x);
  }
}

// Packet reductions: dst[0] = reduce(src[0], packets src[1..]) in plan
// order. Then, by op: recpkt/recspkt pack the result into local packet
// dst[1]; respkt/recspkt send it as packets to the remaining dsts.
template <int DT, int PK>
DEV void op_reduce_pkt(Env& e, const DOp& op, u32 off, u32 unit, int firstSend, bool copyPkt) {
  const u32 P = PK / 2;
  const int NW = P / 4;
  Span s[MAXR], d[MAXR];
  int ns = op.nsrc < MAXR ? op.nsrc : MAXR, nd = op.ndst < MAXR ? op.ndst : MAXR;
  u32 n = 0xffffffffu;
  for (int k = 0; k < ns; k++) {
    s[k] = span(e, e.refs[op.ref0 + k], off, unit);
    n = s[k].n < n ? s[k].n : n;
  }
  for (int k = 0; k < nd; k++) {
    d[k] = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    n = d[k].n < n ? d[k].n : n;
  }
  if (n == 0 || n == 0xffffffffu) return;
  for (u32 i = threadIdx.x; i < n / P; i += blockDim.x) {
    u32 v[2];
    Acc<DT, NW> acc;
    for (int j = 0; j < NW; j++) v[j] = ((const u32*)s[0].p)[i * NW + j];
    acc_init<DT, NW>(acc, v);
    for (int k = 1; k < ns; k++) {
      pkt_read<PK>(s[k].p + (u64)i * PK, e.flag, v, &e.w);
      acc_add<DT, NW>(acc, v, op.reduce);
    }
    acc_out<DT, NW>(acc, v);
    for (int j = 0; j < NW; j++) ((u32*)d[0].p)[i * NW + j] = v[j];
    if (copyPkt && nd > 1) pkt_write<PK>(d[1].p + (u64)i * PK, v, e.flag);
    for (int k = firstSend; k < nd; k++) pkt_write<PK>(d[k].p + (u64)i * PK, v, e.flag);
  }
}

// Port-channel packet forwarding: the bytes already are packets (src in
// packet form), so wait until every packet has arrived, then let the proxy
// copy the whole range. dst[k] gets src[k], or src[0] when it is the only
// one (rppkt's fan-out, ir.PairedSrc); ppkt's counts are always equal.
template <int PK>
DEV void op_pkt_port(Env& e, const DOp& op, u32 off, u32 unit, bool waitSrc) {
  const u32 P = PK / 2;
  if (waitSrc) {
    for (int k = 0; k < op.nsrc; k++) {
      Span s = span(e, e.refs[op.ref0 + k], off, unit);
      for (u32 i = threadIdx.x; i < s.n / P; i += blockDim.x) {
        u32 v[2];
        pkt_read<PK>(s.p + (u64)i * PK, e.flag, v, &e.w);
      }
    }
    __syncthreads();
  }
  if (port_sm(e)) {
    if (!waitSrc) __syncthreads();  // packets this block's other threads wrote
    // Whole packets per store, so a reader polling a packet's flags never
    // sees a flag before its data.
    for (int k = 0; k < op.ndst && op.nsrc > 0; k++) {
      Span s = span(e, e.refs[op.ref0 + (k < op.nsrc ? k : op.nsrc - 1)], off, unit);
      Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
      u32 n = d.n < s.n ? d.n : s.n;
      for (u32 i = threadIdx.x; i < n / P; i += blockDim.x) pkt_copy<PK>(d.p + (u64)i * PK, s.p + (u64)i * PK);
    }
    return;
  }
  // A FIFO: SM copies for the channels whose peer is mapped here
  // (port_fifo), as above; the proxy for the rest.
  bool sm = false;
  for (int k = 0; k < op.ndst && k < op.nidx; k++) sm |= !port_fifo(e, e.a->port[e.idx[op.idx0 + k]]);
  if (sm && !waitSrc) __syncthreads();
  for (int k = 0; sm && k < op.ndst && k < op.nidx && op.nsrc > 0; k++) {
    if (port_fifo(e, e.a->port[e.idx[op.idx0 + k]])) continue;
    Span s = span(e, e.refs[op.ref0 + (k < op.nsrc ? k : op.nsrc - 1)], off, unit);
    Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
    u32 n = d.n < s.n ? d.n : s.n;
    for (u32 i = threadIdx.x; i < n / P; i += blockDim.x) pkt_copy<PK>(d.p + (u64)i * PK, s.p + (u64)i * PK);
  }
  u32 k = threadIdx.x;
  if (k >= op.ndst || op.nsrc == 0 || k >= op.nidx) return;
  const MemChan& c = e.a->port[e.idx[op.idx0 + k]];
  if (!port_fifo(e, c)) return;
  u32 sk = k < op.nsrc ? k : op.nsrc - 1u;
  Span s = span(e, e.refs[op.ref0 + sk], off, unit);
  Span d = span(e, e.refs[op.ref0 + op.nsrc + k], off, unit);
  u32 n = d.n < s.n ? d.n : s.n;
  if (n > 0) fifo_push(e.a->fifo, FIFO_PUT, c.index, (u64)s.p, (u64)d.p, 2ull * n, &e.w);
}

// ---- in-kernel staging (MSCCL_STAGE) ----

#ifdef MSCCL_STAGE
// stage_copy copies spans[0..n): each block its 16-byte-aligned share of
// each span, so the whole grid moves it. The span is picked with constant
// indices: indexing the parameter array with a run-time index would copy
// it into every thread's local memory.
DEV void stage_copy(const StageSpan* spans, u32 n, u32 nblocks) {
  n = n < STAGE_SPANS ? n : STAGE_SPANS;
  for (u32 i = 0; i < n; i++) {
    StageSpan s = spans[0];
#pragma unroll
    for (u32 j = 1; j < STAGE_SPANS; j++) {
      if (j == i) s = spans[j];
    }
    u64 per = ((s.n + nblocks - 1) / nblocks + 15) & ~15ull;
    u64 off = per * blockIdx.x;
    if (off >= s.n) continue;
    u64 len = s.n - off < per ? s.n - off : per;
    msccl::copy_big((char*)s.dst + off, (const char*)s.src + off, len, threadIdx.x, blockDim.x);
  }
}
#endif

// ---- the interpreter ----

template <int DT, int PK>
DEV void exec_op(Env& e, const DOp& op, u32 off, u32 unit) {
  const Args* a = e.a;
  u32 t = threadIdx.x;
  bool port = op.chanType == CHAN_PORT;
  switch (op.code) {
    case OP_NOP:
      __syncthreads();
      break;
    case OP_BARRIER:
      block_barrier(&a->barriers[op.barrier], op.numTBs, op.barrier, &e.w);
      break;
    case OP_SIGNAL:
    case OP_RLXSIGNAL:
      // SM port copies: every thread's stores of earlier puts come first
      // (with a FIFO too: some of its channels may be SM-copied).
      if (port) __syncthreads();
      if (t < op.nidx) {
        const MemChan& c = port ? a->port[e.idx[op.idx0 + t]] : a->mem[e.idx[op.idx0 + t]];
        if (port && port_fifo(e, c)) {
          fifo_push(a->fifo, FIFO_SIGNAL, c.index, 0, 0, 0, &e.w);
        } else if (port) {
          chan_signal(c, false);  // the block's earlier puts completed in their ops
        } else {
          mem_signal(c, op.code == OP_RLXSIGNAL);
        }
      }
      break;
    case OP_WAIT:
    case OP_RLXWAIT:
      if (t < op.nidx) {
        const MemChan& c = port ? a->port[e.idx[op.idx0 + t]] : a->mem[e.idx[op.idx0 + t]];
        chan_wait(c, op.code == OP_RLXWAIT, op.chanType, &e.w);
      }
      break;
    case OP_FLUSH:
      __syncthreads();  // SM-copied channels: the block's own copies are the puts to wait for
      if (!port_sm(e) && t < op.nidx && port_fifo(e, a->port[e.idx[op.idx0 + t]])) {
        fifo_flush(a->fifo, a->port[e.idx[op.idx0 + t]].index, &e.w);
      }
      break;
    case OP_SEM_ACQUIRE:
      if (t < op.nidx) sem_acquire(&a->sems[e.idx[op.idx0 + t]], e.idx[op.idx0 + t], &e.w);
      break;
    case OP_SEM_RELEASE:
      if (t < op.nidx) sem_release(&a->sems[e.idx[op.idx0 + t]]);
      break;
    case OP_PUT:
      if (port) {
        op_put_port(e, op, off, unit, false, false);
      } else {
        op_put_mem(e, op, off, unit);
      }
      break;
    case OP_PWS:
      op_put_port(e, op, off, unit, true, false);
      break;
    case OP_PWSF:
      op_put_port(e, op, off, unit, true, true);
      break;
    case OP_GET:
    case OP_COPY:
      op_put_mem(e, op, off, unit);
      break;
    case OP_RE:
    case OP_RES:
    case OP_RRE:
    case OP_RRES:
      op_reduce<DT>(e, op, off, unit);
      break;
    case OP_PPKT:
      if (port) {
        op_pkt_port<PK>(e, op, off, unit, false);
      } else {
        op_pack<PK>(e, op, off, unit);
      }
      break;
    case OP_CPKT:
      op_pack<PK>(e, op, off, unit);
      break;
    case OP_RPPKT:
      if (port) {
        op_pkt_port<PK>(e, op, off, unit, true);
      } else {
        op_unpack<PK>(e, op, off, unit, true);
      }
      break;
    case OP_UPKT:
      op_unpack<PK>(e, op, off, unit, false);
      break;
    case OP_REPKT:
      op_reduce_pkt<DT, PK>(e, op, off, unit, MAXR, false);
      break;
    case OP_RESPKT:
      op_reduce_pkt<DT, PK>(e, op, off, unit, 1, false);
      break;
    case OP_RECPKT:
      op_reduce_pkt<DT, PK>(e, op, off, unit, MAXR, true);
      break;
    case OP_RECSPKT:
      op_reduce_pkt<DT, PK>(e, op, off, unit, 2, true);
      break;
    default:
      // Switch ops never reach a table: the host refuses such plans.
      break;
  }
}

// STAGE_PARAM is run_block's parameter st, the launch's staging, in the
// _stage instance only, so that the other instances' PTX, symbol names
// included, does not depend on staging (TestPTXGolden).
#ifdef MSCCL_STAGE
#define STAGE_PARAM , const Stage* st
#else
#define STAGE_PARAM
#endif

// run_block runs block blockIdx.x of the rank's plan.
template <int DT, int PK>
DEV void run_block(const Args* a STAGE_PARAM) {
  extern __shared__ int4 smem[];
  __shared__ u64 epoch;
  __shared__ u32 aborted;
  const u32 b = blockIdx.x;
  const TableHeader* g = (const TableHeader*)(a->tables + a->tableOff[b]);
  u32 words = g->bytes / 16;
  for (u32 i = threadIdx.x; i < words; i += blockDim.x) smem[i] = ((const int4*)g)[i];
  if (threadIdx.x == 0) {
    // Written by the previous launch's last block, which finished before
    // this launch started (same stream).
    epoch = *(volatile u64*)a->epoch;
    aborted = 0;
  }
  __syncthreads();
  const TableHeader* h = (const TableHeader*)smem;
  const DOp* ops = (const DOp*)(h + 1);
  Env e;
  e.refs = (const DRef*)(ops + h->nops);
  e.idx = (const u16*)(e.refs + h->nrefs);
  e.a = a;
  e.half = (epoch & 1) * a->scratchHalf;
  e.flag = (u32)(epoch % 0xffffffffull) + 1;
  e.w.timeoutNs = a->timeoutNs;
  e.w.rec = &a->wd[b];
  e.w.rank = a->rank;
  e.w.block = b;
  e.w.aborted = &aborted;
#ifdef MSCCL_TRACE
  TraceHeader* th = trace_header(a, b);
  if (threadIdx.x == 0) {
    th->count = 0;
    th->launch = epoch;
  }
#endif
#ifdef MSCCL_STAGE
  // The prologue: the input is the plan's once every block has copied its
  // share (the executor stages in the kernel only inputs no peer reads or
  // writes, so only this rank's blocks need to see it).
  if (st->nin > 0) {
    e.w.op = h->nops;  // a hang here is reported past the plan's ops
    stage_copy(st->in, st->nin, a->nblocks);
    block_barrier(st->grid, a->nblocks, STAGE_BARRIER, &e.w);
  }
#endif
  for (u32 i = 0; i < h->nops; i++) {
    const DOp& op = ops[i];
    e.w.op = i;
    if (op.code == OP_PIPELINE) {
      for (u32 it = 0; it < op.niter; it++) {
        for (u32 j = 1; j <= op.npipe && i + j < h->nops; j++) {
          e.w.op = i + j;
#ifdef MSCCL_TRACE
          u64 t0 = TRACE_T0;
#endif
          exec_op<DT, PK>(e, ops[i + j], it * op.unit, op.unit);
#ifdef MSCCL_TRACE
          trace_op(a, th, t0, i + j, it);
#endif
        }
      }
      i += op.npipe;
    } else {
#ifdef MSCCL_TRACE
      u64 t0 = TRACE_T0;
#endif
      exec_op<DT, PK>(e, op, 0, 0xffffffffu);
#ifdef MSCCL_TRACE
      trace_op(a, th, t0, i, 0);
#endif
    }
  }
#ifdef MSCCL_STAGE
  // The epilogue: every write into this rank's output, its peers'
  // included, is ordered before the end of its own blocks' ops by their
  // waits (docs/model.md), so after a barrier of every block and a fence
  // the output is final and any block may copy any part of it.
  if (st->nout > 0) {
    e.w.op = h->nops;
    block_barrier(st->grid, a->nblocks, STAGE_BARRIER, &e.w);
    __threadfence();
    stage_copy(st->out, st->nout, a->nblocks);
  }
#endif
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atom_add_gpu32(a->done, 1) == a->nblocks - 1) {
      *a->done = 0;
      *(volatile u64*)a->epoch = epoch + 1;
      __threadfence();
    }
  }
}

#ifdef MSCCL_STAGE
#define MSCCL_KERNEL(name, DT, PK)                                                         \
  extern "C" __global__ void __launch_bounds__(1024, 1) name(const Args* a, const Stage st) { \
    run_block<DT, PK>(a, &st);                                                             \
  }
#else
#define MSCCL_KERNEL(name, DT, PK) \
  extern "C" __global__ void __launch_bounds__(1024, 1) name(const Args* a) { run_block<DT, PK>(a); }
#endif

// The instances (one data type and packet width per compiled module) are
// appended by kernels.Source, which keeps each NVRTC run short.
