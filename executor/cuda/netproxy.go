package cudaexec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/socket"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The sending side of the socket transport on the cuda device: port
// channels to ranks on other nodes (one process per rank, OpenRank).
//
// The kernel pushes such a channel's put, signal and flush into the
// rank's FIFO in mapped host memory, the layout kernels/abi.go fixes for
// the proxy of PortCopyProxy (the kernel's port_fifo: a FIFO is given and
// the channel's peer word is not mapped here). Same-node port channels
// of the same launch are still copied by SMs. A goroutine of this
// process, the net proxy, takes the requests strictly in order, as
// NCCL's proxy thread serves its socket transport where there is no RDMA:
//
//   - put: the source is copied device → pinned host staging on the
//     proxy's own stream, chunk by chunk (socket.ChunkBytes), the next
//     chunk's copy issued before the current one goes on the wire, and
//     each chunk is sent on the communicator's TCP connection to the peer
//     (comm.Channel.Net). The destination is named, not addressed: the
//     op tables give a peer on another node a net address (netAddr: buffer
//     set, buffer type, offset), which the proxy decodes;
//   - signal: a socket signal on the partner channel, behind every put
//     sent before it on that connection;
//   - flush: complete once every put before it has been copied out of
//     the source and handed to the connection (Conn.Put returns when its
//     frames are written), so the flushed word is stored at once: the
//     source may then be overwritten, which is all a flush promises.
//
// The peer's executor applies them in the order sent (netrecv.go): each
// chunk is copied into its buffer host → device, and a signal raises its
// port semaphore in device memory only after those copies completed.

// netAddrBit marks a net address: bit 63, never set in a device address.
// Below it: the buffer set (14 bits, Alloc order, the same on every rank),
// the buffer type (2 bits) and the byte offset (46 bits).
const (
	netAddrBit  = uint64(1) << 63
	netSetShift = 48
	netTypShift = 46
	netOffMask  = uint64(1)<<netTypShift - 1
	netSetMask  = 1<<14 - 1
)

// netAddr is where the op tables place buffer typ of set on a rank of
// another node: offsets add to it as to a device address.
func netAddr(set uint16, typ int) uint64 {
	return netAddrBit | uint64(set&netSetMask)<<netSetShift | uint64(typ&3)<<netTypShift
}

// netDecode splits a net address into the wire's buffer name (set<<2 |
// type) and offset; ok is false for anything else.
func netDecode(a uint64) (buf uint16, off uint64, ok bool) {
	if a&netAddrBit == 0 {
		return 0, 0, false
	}
	set := uint16(a >> netSetShift & netSetMask)
	typ := uint16(a >> netTypShift & 3)
	return set<<2 | typ, a & netOffMask, true
}

// netChan is one port channel end as the net proxy sends on it: nil conn
// for channels within the node (SM-copied, never in the FIFO).
type netChan struct {
	conn    *socket.Conn
	peer    int
	partner int
}

type netProxy struct {
	rank   int
	space  uint32
	fifo   []uint64 // the FIFO's words: entries, then tail, then flushed
	size   uint64
	pushed func() (uint64, error) // the kernels' push count (the FIFO head)
	chans  []netChan

	stream netStream
	stage  [2]*netStage // chunk staging, alternating; marks 0 and 1

	taken atomic.Uint64 // requests taken and handled (sent, or failed)
	stop  chan struct{}
	wg    sync.WaitGroup

	mu   sync.Mutex
	sent map[*socket.Conn]uint64 // last ticket per connection
	err  error
}

// startNetProxy serves fifo (size entries of the kernel's port requests,
// then the tail and flushed words) until close; chans are the rank's
// port channel ends by index.
func startNetProxy(dev netDev, rank int, space uint32, fifo []uint64, size uint64, pushed func() (uint64, error), chans []netChan) (*netProxy, error) {
	p := &netProxy{rank: rank, space: space, fifo: fifo, size: size, pushed: pushed, chans: chans,
		stop: make(chan struct{}), sent: map[*socket.Conn]uint64{}}
	var err error
	if p.stream, err = dev.stream(len(p.stage)); err != nil {
		return nil, err
	}
	for i := range p.stage {
		if p.stage[i], err = dev.stage(socket.ChunkBytes); err != nil {
			p.free()
			return nil, err
		}
	}
	p.wg.Add(1)
	go p.loop()
	return p, nil
}

func (p *netProxy) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = fmt.Errorf("socket transport proxy of rank %d: %w", p.rank, err)
	}
}

// failure is the proxy's first error, nil while it works.
func (p *netProxy) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// loop takes requests in FIFO order. It spins while requests come and
// naps once idle for a while, like the C proxy; its thread is in relaxed
// capture mode, so its stream calls never spoil an application's graph
// capture on another thread (as the pulse's).
func (p *netProxy) loop() {
	defer p.wg.Done()
	defer relaxThread()()
	tailAt := kernels.FifoEntryWords * p.size
	seq := uint64(1)<<kernels.FifoSeqBits - 1
	var tail uint64
	for idle := 0; ; {
		e := p.fifo[kernels.FifoEntryWords*(tail&(p.size-1)):]
		tag := atomic.LoadUint64(&e[3])
		if tag == 0 || tag&seq != (tail+1)&seq {
			select {
			case <-p.stop:
				return
			default:
			}
			if idle++; idle < 20000 {
				runtime.Gosched()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
			continue
		}
		idle = 0
		src, dst, n := atomic.LoadUint64(&e[0]), atomic.LoadUint64(&e[1]), atomic.LoadUint64(&e[2])
		kind, ch := tag>>kernels.FifoKindShift, int(tag>>kernels.FifoChanShift&kernels.FifoChanMask)
		atomic.StoreUint64(&e[3], 0)
		idx := tail
		tail++
		atomic.StoreUint64(&p.fifo[tailAt], tail) // the slot is free: its words are read
		if p.failure() == nil {
			if err := p.handle(idx, kind, ch, src, dst, n); err != nil {
				p.fail(err)
			}
		}
		// A failed proxy still takes requests (the kernel must not also
		// wait for FIFO space); the kernel's waits for the peer end at
		// its watchdog, whose report carries the failure.
		p.taken.Store(tail)
	}
}

func (p *netProxy) handle(idx, kind uint64, ch int, src, dst, n uint64) error {
	var c netChan
	if ch < len(p.chans) {
		c = p.chans[ch]
	}
	if kind == kernels.FifoFlush {
		// Every put before it was handed to its connection already.
		atomic.StoreUint64(&p.fifo[kernels.FifoEntryWords*p.size+1], idx+1)
		return nil
	}
	if c.conn == nil {
		return fmt.Errorf("request %d on port channel %d: no socket connection (the channel does not lead to another node)", idx, ch)
	}
	switch kind {
	case kernels.FifoPut:
		return p.put(c, src, dst, n)
	case kernels.FifoSignal:
		if c.partner < 0 {
			return fmt.Errorf("signal on port channel %d to rank %d, which has no partner channel there", ch, c.peer)
		}
		t, err := c.conn.Signal(p.space, uint32(c.partner))
		p.sentUpTo(c.conn, t)
		return err
	}
	return fmt.Errorf("request %d: unknown kind %d", idx, kind)
}

// put sends n bytes from the device address src to the net address dst
// of c's peer, pipelined: chunk i+1 is copied out while chunk i is sent.
func (p *netProxy) put(c netChan, src, dst, n uint64) error {
	buf, off, ok := netDecode(dst)
	if !ok {
		return fmt.Errorf("put to rank %d at %#x, not a buffer of another node's rank", c.peer, dst)
	}
	const chunk = uint64(socket.ChunkBytes)
	count := (n + chunk - 1) / chunk
	size := func(i uint64) uint64 { return min(chunk, n-i*chunk) }
	issue := func(i uint64) error {
		if err := p.stream.copy(p.stage[i%2].addr, src+i*chunk, int64(size(i))); err != nil {
			return err
		}
		return p.stream.mark(int(i % 2))
	}
	if count > 0 {
		if err := issue(0); err != nil {
			return err
		}
	}
	for i := uint64(0); i < count; i++ {
		// Slot (i+1)%2 last held chunk i-1, which Put has written out.
		if i+1 < count {
			if err := issue(i + 1); err != nil {
				return err
			}
		}
		if err := p.stream.wait(int(i % 2)); err != nil {
			return err
		}
		t, err := c.conn.Put(p.space, buf, off+i*chunk, p.stage[i%2].host[:size(i)])
		p.sentUpTo(c.conn, t)
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *netProxy) sentUpTo(c *socket.Conn, t uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t > p.sent[c] {
		p.sent[c] = t
	}
}

// drain waits, after this rank's kernels ended, until the proxy has
// handled every request they pushed and the peers have applied every
// one sent (their acknowledgements), so that this rank's buffers may be
// freed and its peers' may be too (after the barrier that follows).
func (p *netProxy) drain(timeout time.Duration) error {
	pushed, err := p.pushed()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for p.taken.Load() < pushed {
		if time.Now().After(deadline) {
			return fmt.Errorf("socket transport proxy of rank %d: %d of %d port requests handled after %v", p.rank, p.taken.Load(), pushed, timeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
	if err := p.failure(); err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	p.mu.Lock()
	sent := maps.Clone(p.sent)
	p.mu.Unlock()
	var errs []error
	for c, t := range sent {
		errs = append(errs, c.WaitAcked(ctx, t))
	}
	return errors.Join(errs...)
}

// close stops the loop and frees the proxy's stream and staging.
func (p *netProxy) close() error {
	close(p.stop)
	p.wg.Wait()
	return p.free()
}

func (p *netProxy) free() error {
	var errs []error
	if p.stream != nil {
		errs = append(errs, p.stream.destroy())
	}
	for _, st := range p.stage {
		if st != nil {
			errs = append(errs, st.free())
		}
	}
	return errors.Join(errs...)
}

// setupNet starts the socket transport when some port channel of this
// rank leads to another node: the FIFO the kernel pushes those channels'
// requests to, the proxy that serves it, and the receiver of what those
// peers send, registered with the communicator under this executor's
// space (taken in OpenRank by every rank, so the numbers agree).
func (e *RankExecutor) setupNet() error {
	net := false
	for _, ch := range e.conns.Port {
		net = net || ch.Net != nil
	}
	if !net {
		return nil
	}
	rs, entries := e.rs, e.k.opt.FifoEntries
	var err error
	if rs.fifo, err = cuda.HostAllocMapped(int64(kernels.FifoEntryBytes*entries + 64)); err != nil {
		return err
	}
	ports := make([]netPort, len(e.conns.Port))
	chans := make([]netChan, len(e.conns.Port))
	for i, ch := range e.conns.Port {
		chans[i] = netChan{conn: ch.Net, peer: ch.Peer, partner: ch.Partner}
		ports[i] = netPort{peer: ch.Peer, net: ch.Net != nil}
		in, err := devPtr(ch.Inbound)
		if err != nil {
			return fmt.Errorf("port channel %d: %w", i, err)
		}
		ports[i].inbound = uint64(in)
	}
	if e.nr, err = newNetRecv(cudaNet{}, e.rank, e.k.opt.Timeout, ports); err != nil {
		return err
	}
	fifo := unsafe.Slice((*uint64)(unsafe.Pointer(&rs.fifo.Bytes[0])), len(rs.fifo.Bytes)/8)
	pushed := func() (uint64, error) {
		var w [8]byte
		err := cuda.MemcpyDtoH(w[:], rs.fifoHead)
		return binary.LittleEndian.Uint64(w[:]), err
	}
	if e.np, err = startNetProxy(cudaNet{}, e.rank, e.space, fifo, uint64(entries), pushed, chans); err != nil {
		return err
	}
	e.c.Register(e.space, e.nr)
	return nil
}

// fifoArgs gives the kernel rank rs's FIFO, if it has one.
func fifoArgs(a *kernels.Args, rs *rankRes, entries int) {
	if rs.fifo == nil {
		return
	}
	fe := int64(kernels.FifoEntryBytes * entries)
	a.FifoEntries = uint64(rs.fifo.Dev)
	a.FifoHead = uint64(rs.fifoHead)
	a.FifoTail = uint64(rs.fifo.Dev) + uint64(fe)
	a.FifoFlushed = uint64(rs.fifo.Dev) + uint64(fe+8)
	a.FifoSize = uint64(entries)
}

// netBufs names the buffers of ranks on other nodes for the op tables
// (net addresses the proxy decodes; the kernel never dereferences them)
// and numbers b for the peers' requests.
func (e *RankExecutor) netBufs(b *RankBuffers, scratch int64) {
	if e.nr == nil {
		return
	}
	b.netID = e.nextSet
	e.nextSet = (e.nextSet + 1) & netSetMask
	p := e.k.p
	for r := range p.GPUs {
		if e.c.SameNode(r) {
			continue
		}
		g := p.Region(r, b.in, b.out, scratch, rankAlign)
		b.bufs[r] = bufSet{in: netAddr(b.netID, int(ir.BufInput)), out: netAddr(b.netID, int(ir.BufOutput)),
			scratch: netAddr(b.netID, int(ir.BufScratch)), inN: g.InBytes, outN: g.OutBytes, scratchN: scratch, net: true}
	}
	e.nr.register(b)
}

// closeNet stops the proxy and the receiver, after the barrier of Close:
// no peer sends to this executor any more.
func (e *RankExecutor) closeNet() error {
	var errs []error
	if e.nr != nil {
		e.c.Register(e.space, nil)
	}
	if e.np != nil {
		errs = append(errs, e.np.close())
		e.np = nil
	}
	if e.nr != nil {
		errs = append(errs, e.nr.close())
		e.nr = nil
	}
	return errors.Join(errs...)
}

// netFailure is the proxy's failure, for a hang report.
func (e *RankExecutor) netFailure() error {
	if e.np == nil {
		return nil
	}
	return e.np.failure()
}
