"""One rank of test_primitives' job on the cpu device: buffers,
registrations and channel handles for a user's own kernel, built through
the C ABI, checked against the layout kernels/handles.go gives them (read
here with struct, as a kernel would read them), and port channels served
by the proxy. argv: unique id, rank, world.

On the cpu device every address in a handle is an address of this
process: the peer's buffer and semaphore words are its shared memory
mapped here, so the checks below read and write through them.
"""

import array
import ctypes
import struct
import sys
import time

import msccl

# kernels/handles.go and kernels/layout.go: msccl::Semaphore is Chan
# {inbound, remoteInbound, expected u64; peer i32; index u32} then Watch
# {records, timeoutNs u64; rank, nrecords u32}.
SEM = "QQQiI" + "QQII"
MEMORY = "<" + SEM + "QQQ"  # dst, src, packets
PORT = "<" + SEM + "QQQQQ" + "QQ"  # fifo {entries, head, tail, flushed, size}, dst, src
# kernels/abi.go: a FIFO entry is 4 words (src, dst, bytes, tag), the tag
# written last: kind << 56 | channel << 40 | sequence number (from 1).
FIFO_WORDS, PUT, SIGNAL, FLUSH = 4, 1, 2, 3
SIZE = 4096


def fail(rank, msg):
    raise SystemExit("rank %d: %s" % (rank, msg))


def u64(addr):
    return ctypes.c_uint64.from_address(addr)


def barrier(comm):
    comm.all_reduce(array.array("i", [0]))


def expect_refusal(comm, what, call, want):
    """call fails on this rank with a message containing want."""
    try:
        r = call()
    except msccl.Error as e:
        if want not in str(e):
            fail(comm.rank, "%s: message %r lacks %r" % (what, str(e), want))
        return
    r.close()
    fail(comm.rank, "%s was not refused" % what)


def handles(ch, fmt):
    raw = ctypes.string_at(ch.ptr, ch.nbytes)
    if ch.handle_bytes != struct.calcsize(fmt) or ch.nbytes != ch.count * ch.handle_bytes:
        raise SystemExit("%s handles: %d bytes each, %d in all for %d; kernels/handles.go says %d each"
                         % (ch.kind, ch.handle_bytes, ch.nbytes, ch.count, struct.calcsize(fmt)))
    return [struct.unpack_from(fmt, raw, i * ch.handle_bytes) for i in range(ch.count)]


def check_sem(rank, h, i, peer, ch):
    inbound, remote, expected, p, index, records, timeout, wrank, nrec = h[:9]
    w = ch.watch_info
    if (p, index) != (peer, i) or (records, timeout, wrank, nrec) != (w["records"], w["timeout_ns"], rank, w["nrecords"]):
        fail(rank, "%s handle %d: peer %d index %d watch %r, want peer %d index %d watch %r" % (ch.kind, i, p, index, h[5:9], peer, i, w))
    # The inbound word may already hold the peer's signal; the count of
    # signals consumed is this end's alone.
    if not inbound or not expected or u64(expected).value != 0:
        fail(rank, "%s handle %d: semaphore words %#x %#x, the second not zeroed" % (ch.kind, i, inbound, expected))
    return inbound, remote


def memory(comm, buf, peers):
    rank = comm.rank
    ch = comm.memory_channels(buf, peers)
    hs = handles(ch, MEMORY)
    for i, (peer, h) in enumerate(zip(peers, hs)):
        inbound, remote = check_sem(rank, h, i, peer, ch)
        dst, src, packets = h[9:]
        if src != buf.ptr or packets != buf.ptr:
            fail(rank, "memory handle %d: src %#x packets %#x, want this rank's buffer %#x" % (i, src, packets, buf.ptr))
        # dst is the peer's buffer mapped here: it holds the peer's bytes.
        if ctypes.string_at(dst, SIZE) != bytes([peer + 1]) * SIZE:
            fail(rank, "memory handle %d: dst %#x does not hold rank %d's buffer" % (i, dst, peer))
        # A signal: add to the peer's inbound word through remoteInbound.
        u64(remote).value += rank + 1
    barrier(comm)
    for i, (peer, h) in enumerate(zip(peers, hs)):
        if u64(h[0]).value != peer + 1:
            fail(rank, "memory channel %d: inbound word %d, want rank %d's signal %d (channels did not pair)" % (i, u64(h[0]).value, peer, peer + 1))
    ch.check()
    barrier(comm)
    ch.close()


def push(fifo, kind, chan, src=0, dst=0, n=0):
    """fifo_push of port_channel.cuh, written over the FIFO's words."""
    entries, head, tail, flushed, size = fifo
    idx = u64(head).value
    u64(head).value = idx + 1
    e = entries + 8 * FIFO_WORDS * (idx % size)
    u64(e).value, u64(e + 8).value, u64(e + 16).value = src, dst, n
    u64(e + 24).value = kind << 56 | chan << 40 | (idx + 1)
    return idx + 1


def wait_for(rank, what, cond):
    deadline = time.time() + 20
    while not cond():
        if time.time() > deadline:
            fail(rank, "timed out waiting for " + what)
        time.sleep(0.001)


def port(comm, buf):
    rank, world = comm.rank, comm.size
    succ, pred = (rank + 1) % world, (rank - 1) % world
    ch = comm.port_channels(buf, [succ, pred])
    hs = handles(ch, PORT)
    for i, (peer, h) in enumerate(zip([succ, pred], hs)):
        check_sem(rank, h, i, peer, ch)
        entries, head, tail, flushed, size, dst, src = h[9:]
        if size != msccl_fifo_entries or head != entries + 8 * (FIFO_WORDS * size + 2) or tail != entries + 8 * FIFO_WORDS * size or flushed != tail + 8:
            fail(rank, "port handle %d: fifo %r is not the layout of kernels.Fifo" % (i, h[9:14]))
        if src != buf.ptr or ctypes.string_at(dst, 64) != bytes([peer + 1]) * 64:
            fail(rank, "port handle %d: src %#x or dst %#x is not the registered buffer" % (i, src, dst))
    fifo, dst = hs[0][9:14], hs[0][14]
    # Put 64 bytes of this rank's buffer into the successor's at 2048 +
    # 64 * rank, then signal; the proxy copies, then raises the
    # successor's semaphore; a flush returns once both are done.
    push(fifo, PUT, 0, buf.ptr, dst + 2048 + 64 * rank, 64)
    push(fifo, SIGNAL, 0)
    seq = push(fifo, FLUSH, 0)
    wait_for(rank, "the flush", lambda: u64(fifo[3]).value >= seq)
    wait_for(rank, "the predecessor's signal", lambda: u64(hs[1][0]).value == 1)
    got = bytes(buf.host()[2048 + 64 * pred:2048 + 64 * pred + 64])
    if got != bytes([pred + 1]) * 64:
        fail(rank, "the predecessor's put: %r" % got[:8])
    ch.check()
    # A put no flush follows: check names the rank, channel and peer (the
    # proxy has served it by then); a flush on the channel clears it.
    push(fifo, PUT, 0, buf.ptr + 1024, dst + 1024 + 64 * rank, 64)
    try:
        ch.check()
        fail(rank, "check passed a put with no flush after it")
    except msccl.RunError as e:
        want = "rank %d channel 0 (peer rank %d): 1 puts (64 bytes) with no flush after them" % (rank, succ)
        if want not in str(e) or "flush() before reusing a put's source" not in str(e):
            fail(rank, "check: %s, want %r" % (e, want))
    seq = push(fifo, FLUSH, 0)
    wait_for(rank, "the second flush", lambda: u64(fifo[3]).value >= seq)
    ch.check()
    barrier(comm)
    # A put outside the registered buffers fails the proxy; check names it.
    push(fifo, PUT, 0, buf.ptr, dst + SIZE - 8, 64)
    wait_for(rank, "the proxy's failure", lambda: _failed(ch))
    try:
        ch.check()
    except msccl.RunError as e:
        if "outside the registered buffer" not in str(e):
            fail(rank, "check: %s" % e)
    barrier(comm)
    ch.close()


def _failed(ch):
    try:
        ch.check()
    except msccl.RunError:
        return True
    return False


msccl_fifo_entries = 1024  # msccl.PortFifoEntries


def main():
    uid, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with msccl.Communicator.from_unique_id(uid, rank, world) as comm:
        buf = comm.alloc_buffer(SIZE)
        buf.host()[:] = bytes([rank + 1]) * SIZE
        peers = [p for p in range(world) if p != rank]
        # Refusals reach every rank alike, naming the rank and its reason;
        # the job goes on after each.
        mine = bytearray(SIZE) if rank == 0 else buf
        expect_refusal(comm, "process memory", lambda: comm.register(mine), "rank 0: host memory of this process")
        expect_refusal(comm, "part of a buffer", lambda: comm.register(buf, 2048), "2048 bytes of a 4096-byte buffer")
        expect_refusal(comm, "a channel to itself", lambda: comm.memory_channels(buf, [rank]), "rank 0's channel 0: peer 0 is the rank itself")
        expect_refusal(comm, "unpaired lists", lambda: comm.memory_channels(buf, [1] if rank == 0 else []),
                       "rank 0 lists 1 channels to rank 1, which lists 0 back")
        expect_refusal(comm, "a rank outside the job", lambda: comm.memory_channels(buf, [world]),
                       "peer %d is outside the job's %d ranks" % (world, world))
        memory(comm, buf, peers)
        port(comm, buf)
        buf.close()
    print("rank %d ok" % rank)


if __name__ == "__main__":
    main()
