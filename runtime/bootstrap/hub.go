package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hub is the rendezvous root: a star that every rank (rank 0 included,
// over loopback) connects to. It admits ranks that prove the secret,
// completes collectives (gather every blob, broadcast the lot), relays
// sends in arrival order, and is the one place that decides a failure:
// who did not arrive, who died, who broke the protocol. It tells every
// rank the same verdict, so they all fail with the same error.
type hub struct {
	world   int
	secret  [16]byte
	timeout time.Duration
	ln      net.Listener
	start   time.Time

	mu      sync.Mutex
	peers   []*hubPeer // by rank; nil until admitted
	nodes   []string
	joined  int
	running bool        // every rank joined and was welcomed
	err     error       // the verdict, once the job failed
	timer   *time.Timer // the connect phase's deadline
	dl      time.Time
	colls   map[uint64]*pending
	live    int // admitted connections not yet gone
	done    chan struct{}
	doneSet bool

	// Connections that have not proved the secret yet, in total and by
	// source host: strangers beyond the caps are closed at once, so they
	// can neither exhaust descriptors nor crowd out the ranks.
	strangers  int
	strangerBy map[string]int
	// refused notes connections refused for a wrong secret, by the rank
	// they claimed: an unauthenticated claim cannot fail the job (anyone
	// could then end it), but the connect timeout's verdict quotes it.
	refused map[int]string
}

type hubPeer struct {
	rank    int
	conn    net.Conn
	out     *outbox
	lastSeq uint64 // last collective it contributed to
	bye     bool
	gone    bool
}

// pending is one collective some ranks have reached.
type pending struct {
	op       byte
	seq      uint64
	blobs    [][]byte
	have     []bool
	n        int
	first    time.Time
	deadline time.Time
	timer    *time.Timer
}

// The admission limits; variables so tests can lower them.
var (
	// maxStrangers bounds the connections in their handshake at once.
	maxStrangers = 256
	// maxStrangersPerHost bounds them per source address, so one host
	// cannot take every slot from ranks on other hosts.
	maxStrangersPerHost = 32
	// handshakeLimitTime bounds one handshake: a silent stranger holds its
	// slot no longer.
	handshakeLimitTime = 10 * time.Second
	// acceptBackoffMax bounds the pause after a failed Accept.
	acceptBackoffMax = time.Second
)

// acceptRetries counts Accept errors the root survived (tests read it to
// know a flood really ran the listener out of descriptors).
var acceptRetries atomic.Int64

func opName(op byte, seq uint64) string {
	if op == opBarrier {
		return fmt.Sprintf("barrier #%d", seq)
	}
	return fmt.Sprintf("all-gather #%d", seq)
}

// inheritedUsed records the inherited listener descriptors already taken:
// once closed, the number may be reused by any file this process opens,
// so a second Connect in the process must bind instead.
var inheritedUsed sync.Map

// startHub listens for cfg's job. deadline bounds the connect phase (each
// rank's hello can shorten it); dial is where rank 0 reaches it.
func startHub(cfg *Config, deadline time.Time) (h *hub, dial string, err error) {
	var ln net.Listener
	if _, used := inheritedUsed.LoadOrStore(cfg.ListenFD, true); cfg.ListenFD > 0 && !used {
		f := os.NewFile(uintptr(cfg.ListenFD), "msccl-bootstrap-listener")
		ln, err = net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, "", fmt.Errorf("bootstrap: inherited listener (fd %d): %w", cfg.ListenFD, err)
		}
	} else {
		addr := cfg.ListenAddr
		if addr == "" {
			addr = cfg.ID.Addr
		}
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, "", fmt.Errorf("bootstrap: rank 0 cannot listen on %s for the rendezvous: %w", addr, err)
		}
	}
	h = &hub{world: cfg.World, secret: cfg.ID.Secret, timeout: cfg.Timeout, ln: ln, start: time.Now(),
		peers: make([]*hubPeer, cfg.World), nodes: make([]string, cfg.World), colls: map[uint64]*pending{}, done: make(chan struct{}),
		strangerBy: map[string]int{}, refused: map[int]string{}}
	h.dl = deadline
	h.timer = time.AfterFunc(time.Until(deadline), h.connectTimeout)
	go h.accept()
	a := ln.Addr().(*net.TCPAddr)
	ip := a.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return h, net.JoinHostPort(ip.String(), fmt.Sprint(a.Port)), nil
}

// accept admits connections until the listener is closed. Any other
// Accept error (EMFILE when strangers hold every descriptor, ENFILE,
// ECONNABORTED, ENOBUFS) is about one connection or a passing shortage:
// wait and try again, so the ranks still get in once it passes.
func (h *hub) accept() {
	backoff := 5 * time.Millisecond
	for {
		c, err := h.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return // closed when every rank joined, or at shutdown
			}
			acceptRetries.Add(1)
			time.Sleep(backoff)
			backoff = min(2*backoff, acceptBackoffMax)
			continue
		}
		backoff = 5 * time.Millisecond
		host := remoteHost(c)
		h.mu.Lock()
		full := h.strangers >= maxStrangers || h.strangerBy[host] >= maxStrangersPerHost
		if !full {
			h.strangers++
			h.strangerBy[host]++
		}
		h.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		go h.admit(c, host)
	}
}

// remoteHost is the source address of c without its port.
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

// vouched moves c out of the strangers' count: its handshake ended.
func (h *hub) vouched(host string) {
	h.mu.Lock()
	h.strangers--
	if h.strangerBy[host]--; h.strangerBy[host] <= 0 {
		delete(h.strangerBy, host)
	}
	h.mu.Unlock()
}

// maxRefusedNotes bounds the refusals a verdict quotes.
const maxRefusedNotes = 8

// admit runs the handshake on c. A connection that does not prove the
// secret, or arrives when the job is complete or failed, is refused and
// changes nothing else.
func (h *hub) admit(c net.Conn, host string) {
	hs := min(h.timeout, handshakeLimitTime)
	m, rn, err := serverHello(c, h.secret, time.Now().Add(hs))
	h.vouched(host)
	if err != nil {
		if errors.Is(err, errAuth) && m != nil {
			h.noteRefusal(m.rank, fmt.Sprintf("a connection from %s claiming rank %d was refused: it does not hold this job's secret", host, m.rank))
		}
		c.Close()
		return
	}
	// A rank that proved the secret belongs to this job: a claim that
	// cannot be right is a misconfigured job, and every rank hears why at
	// once rather than timing out on the rank that never got in.
	refuse := func(err error) {
		c.Write(encode(&msg{kind: kReject, text: err.Error()}))
		c.Close()
		h.fail(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.err != nil:
		c.Write(encode(abortMsg(h.err)))
		c.Close()
		return
	case m.world != h.world:
		refuse(&ProtocolError{Rank: m.rank, Detail: fmt.Sprintf("rank %d (from %s) says the world size is %d, rank 0 says %d", m.rank, host, m.world, h.world)})
		return
	case m.rank >= h.world:
		refuse(&ProtocolError{Rank: m.rank, Detail: fmt.Sprintf("rank %d (from %s) is out of range for world size %d", m.rank, host, h.world)})
		return
	case h.peers[m.rank] != nil:
		refuse(&ProtocolError{Rank: m.rank, Detail: fmt.Sprintf("rank %d joined twice (from %s, and earlier from %s)", m.rank, host, remoteHost(h.peers[m.rank].conn))})
		return
	}
	c.SetDeadline(time.Time{})
	p := &hubPeer{rank: m.rank, conn: c}
	p.out = newOutbox(c, h.timeout, func(err error) { h.gone(p, err) })
	p.out.push(encode(&msg{kind: kAccept, mac: acceptMAC(h.secret, rn, m.nonce)}))
	h.peers[m.rank], h.nodes[m.rank] = p, m.node
	h.joined++
	h.live++
	if dl := time.Now().Add(time.Duration(m.ms) * time.Millisecond); dl.Before(h.dl) {
		// A rank with less time left than rank 0 shortens the connect
		// phase, so the verdict reaches it before it gives up waiting.
		h.dl = dl
		h.timer.Reset(time.Until(dl))
	}
	go h.read(p)
	if h.joined < h.world {
		return
	}
	h.running = true
	h.timer.Stop()
	h.ln.Close()
	nodes := make([][]byte, h.world)
	for i, n := range h.nodes {
		nodes[i] = []byte(n)
	}
	w := encode(&msg{kind: kWelcome, list: nodes})
	for _, q := range h.peers {
		q.out.push(w)
	}
}

func (h *hub) connectTimeout() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running || h.err != nil {
		return
	}
	var missing []int
	for r, p := range h.peers {
		if p == nil {
			missing = append(missing, r)
		}
	}
	te := &TimeoutError{Op: "connect", Ranks: missing, After: time.Since(h.start).Round(time.Millisecond)}
	var notes []string
	for _, r := range missing {
		if n, ok := h.refused[r]; ok {
			notes = append(notes, n)
		}
	}
	if len(notes) == 0 && len(h.refused) > 0 {
		for _, n := range h.refused {
			notes = append(notes, n)
		}
		sort.Strings(notes)
	}
	te.Detail = strings.Join(notes, "; ")
	h.fail(te)
}

// noteRefusal remembers why a connection claiming rank was refused.
func (h *hub) noteRefusal(rank int, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.refused[rank]; ok || len(h.refused) >= maxRefusedNotes {
		return
	}
	h.refused[rank] = why
}

// read handles one rank's frames in order; that order is what makes
// sends from one rank arrive in the order they were made.
func (h *hub) read(p *hubPeer) {
	for {
		kind, body, err := readFrame(p.conn, frameLimit)
		if err != nil {
			if errors.Is(err, errFrame) {
				h.protocol(p, err.Error())
			}
			h.gone(p, err)
			return
		}
		m, err := decode(kind, body)
		if err != nil {
			h.protocol(p, err.Error())
			h.gone(p, err)
			return
		}
		h.mu.Lock()
		h.handle(p, m)
		h.mu.Unlock()
	}
}

func (h *hub) protocol(p *hubPeer, detail string) {
	h.mu.Lock()
	h.fail(&ProtocolError{Rank: p.rank, Detail: detail})
	h.mu.Unlock()
}

// handle acts on one frame from p; h.mu is held.
func (h *hub) handle(p *hubPeer, m *msg) {
	if h.err != nil {
		return
	}
	if !h.running || p.bye {
		h.fail(&ProtocolError{Rank: p.rank, Detail: fmt.Sprintf("sent %s before the rendezvous completed or after its bye", kindName(m.kind))})
		return
	}
	switch m.kind {
	case kGather:
		h.contribute(p, m)
	case kSend:
		if m.peer >= h.world {
			h.fail(&ProtocolError{Rank: p.rank, Detail: fmt.Sprintf("send to rank %d of %d", m.peer, h.world)})
			return
		}
		if t := h.peers[m.peer]; !t.bye && !t.gone {
			t.out.push(encode(&msg{kind: kDeliver, peer: p.rank, tag: m.tag, data: m.data}))
		}
	case kBye:
		p.bye = true
		l := encode(&msg{kind: kLeft, peer: p.rank})
		for _, q := range h.peers {
			if q != p && !q.bye && !q.gone {
				q.out.push(l)
			}
		}
		for _, pc := range h.colls {
			if !pc.have[p.rank] {
				h.fail(&PeerError{Op: opName(pc.op, pc.seq), Rank: p.rank, Closed: true})
				return
			}
		}
		p.out.finish()
	default:
		h.fail(&ProtocolError{Rank: p.rank, Detail: fmt.Sprintf("a rank may not send %s", kindName(m.kind))})
	}
}

// contribute records p's part of a collective and completes it when every
// rank has given one. h.mu is held.
func (h *hub) contribute(p *hubPeer, m *msg) {
	if m.seq != p.lastSeq+1 {
		h.fail(&ProtocolError{Rank: p.rank, Detail: fmt.Sprintf("collective #%d after #%d", m.seq, p.lastSeq)})
		return
	}
	p.lastSeq = m.seq
	pc := h.colls[m.seq]
	now := time.Now()
	if pc == nil {
		pc = &pending{op: m.op, seq: m.seq, blobs: make([][]byte, h.world), have: make([]bool, h.world), first: now}
		h.colls[m.seq] = pc
		for _, q := range h.peers {
			if q.bye {
				h.fail(&PeerError{Op: opName(m.op, m.seq), Rank: q.rank, Closed: true})
				return
			}
		}
	}
	if pc.op != m.op {
		h.fail(&ProtocolError{Rank: p.rank, Detail: fmt.Sprintf("called %s while others called %s", opName(m.op, m.seq), opName(pc.op, m.seq))})
		return
	}
	pc.blobs[p.rank], pc.have[p.rank] = m.data, true
	pc.n++
	if dl := now.Add(time.Duration(m.ms) * time.Millisecond); pc.deadline.IsZero() || dl.Before(pc.deadline) {
		// The collective fails when the first rank's time runs out: that
		// rank would give up anyway, and the others learn why from the root.
		pc.deadline = dl
		if pc.timer != nil {
			pc.timer.Stop()
		}
		seq := m.seq
		pc.timer = time.AfterFunc(time.Until(dl), func() { h.expire(seq) })
	}
	if pc.n < h.world {
		return
	}
	pc.timer.Stop()
	delete(h.colls, m.seq)
	out := &msg{kind: kGathered, seq: m.seq}
	if pc.op == opAllGather {
		total := 0
		for _, b := range pc.blobs {
			total += len(b) + 10
		}
		if total > frameLimit-32 {
			h.fail(&ProtocolError{Rank: p.rank, Detail: fmt.Sprintf("%s gathers %d bytes, over the %d-byte frame limit", opName(pc.op, pc.seq), total, frameLimit)})
			return
		}
		out.list = pc.blobs
	}
	f := encode(out)
	for _, q := range h.peers {
		q.out.push(f)
	}
}

func (h *hub) expire(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pc := h.colls[seq]
	if pc == nil || h.err != nil {
		return
	}
	var missing []int
	for r, ok := range pc.have {
		if !ok {
			missing = append(missing, r)
		}
	}
	h.fail(&TimeoutError{Op: opName(pc.op, seq), Ranks: missing, After: time.Since(pc.first).Round(time.Millisecond)})
}

// gone records that p's connection ended. Without a bye first, the rank
// died (or its host did): the job fails, naming it.
func (h *hub) gone(p *hubPeer, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.gone {
		return
	}
	p.gone = true
	p.conn.Close()
	p.out.finish()
	h.live--
	if !p.bye && h.err == nil {
		h.fail(&PeerError{Op: "rendezvous root", Rank: p.rank, Detail: err.Error()})
	}
	if h.live == 0 && (h.running || h.err != nil) && !h.doneSet {
		h.doneSet = true
		close(h.done)
	}
}

// fail records the verdict and sends it to every rank still connected;
// their connections close once it is written. h.mu is held.
func (h *hub) fail(err error) {
	if h.err != nil {
		return
	}
	h.err = err
	h.timer.Stop()
	// The listener stays open until shutdown: a rank that arrives late
	// hears the verdict (admit rejects it with the abort) instead of
	// retrying a closed port until its own timeout.
	for _, pc := range h.colls {
		if pc.timer != nil {
			pc.timer.Stop()
		}
	}
	f := encode(abortMsg(err))
	for _, p := range h.peers {
		if p != nil && !p.gone {
			p.out.push(f)
			p.out.finish()
		}
	}
	if h.live == 0 && !h.doneSet {
		h.doneSet = true
		close(h.done)
	}
}

// linger waits up to d for every rank to leave: after a failure, each
// rank closes its end once it has read the verdict.
func (h *hub) linger(d time.Duration) {
	select {
	case <-h.done:
	case <-time.After(d):
	}
}

// shutdown waits up to linger for every rank to leave, then closes what
// is left.
func (h *hub) shutdown(linger time.Duration) {
	h.linger(linger)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ln.Close()
	h.timer.Stop()
	for _, p := range h.peers {
		if p != nil {
			p.conn.Close()
		}
	}
	for _, pc := range h.colls {
		if pc.timer != nil {
			pc.timer.Stop()
		}
	}
}
