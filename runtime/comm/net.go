package comm

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sync"

	"github.com/msccl-go/msccl-go/internal/socket"
)

// NetTarget receives what peers on other nodes send through the socket
// transport to one registration space (an executor and its buffers): a
// put of data at offset off of buffer buf (whose meaning the executor
// defines for both ends), and a signal on this rank's port channel ch.
// Calls for one peer come in the order that peer sent them.
type NetTarget interface {
	NetPut(peer int, buf uint16, off uint64, data []byte) error
	NetSignal(peer int, ch uint32) error
}

// netState is the communicator's socket transport: one connection per
// peer on another node, made the first time a plan needs it, and the
// spaces executors registered.
type netState struct {
	mu     sync.Mutex
	conns  map[int]*socket.Conn
	spaces map[uint32]NetTarget
	next   uint32
	serve  sync.WaitGroup
}

// dispatch routes one connection's requests to the registered spaces.
type dispatch struct {
	c    *Comm
	peer int
}

func (d dispatch) target(space uint32) (NetTarget, error) {
	d.c.net.mu.Lock()
	defer d.c.net.mu.Unlock()
	t := d.c.net.spaces[space]
	if t == nil {
		return nil, fmt.Errorf("rank %d sent to registration space %d, which rank %d does not have open", d.peer, space, d.c.rank)
	}
	return t, nil
}

func (d dispatch) Put(space uint32, buf uint16, off uint64, data []byte) error {
	t, err := d.target(space)
	if err != nil {
		return err
	}
	return t.NetPut(d.peer, buf, off, data)
}

func (d dispatch) Signal(space, ch uint32) error {
	t, err := d.target(space)
	if err != nil {
		return err
	}
	return t.NetSignal(d.peer, ch)
}

// NewSpace reserves the next registration space number. Collective in
// effect: every rank calls it at the same point (an executor's Open), so
// the same number means the same executor on every rank.
func (c *Comm) NewSpace() uint32 {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	c.net.next++
	return c.net.next
}

// Register makes t receive what peers send to space; nil removes it.
func (c *Comm) Register(space uint32, t NetTarget) {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.net.spaces == nil {
		c.net.spaces = map[uint32]NetTarget{}
	}
	if t == nil {
		delete(c.net.spaces, space)
		return
	}
	c.net.spaces[space] = t
}

// netPeers are the ranks on other nodes that w connects this rank to by
// port channels in either direction (a channel's two ends need one
// connection, so both ranks must agree on it).
func (c *Comm) netPeers(w *Wiring) []int {
	set := map[int]bool{}
	for r := range w.Ranks {
		for _, q := range w.Ranks[r].Port {
			a, b := r, q
			if a == c.rank && !c.SameNode(b) {
				set[b] = true
			}
			if b == c.rank && a >= 0 && a < c.size && !c.SameNode(a) {
				set[a] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// needsNet reports whether any rank of w has a port channel to another
// node: then every rank takes part in the address exchange.
func (c *Comm) needsNet(w *Wiring) bool {
	for r := range w.Ranks {
		for _, q := range w.Ranks[r].Port {
			if q >= 0 && q < c.size && c.nodes[q] != c.nodes[r] {
				return true
			}
		}
	}
	return false
}

// connectNet makes the socket connections w needs that do not exist yet.
// Collective over the job (an all-gather of listen addresses) when any
// rank of w needs one.
func (c *Comm) connectNet(ctx context.Context, w *Wiring) error {
	if !c.needsNet(w) {
		return nil
	}
	want := map[int]bool{}
	c.net.mu.Lock()
	for _, r := range c.netPeers(w) {
		if c.net.conns[r] == nil {
			want[r] = true
		}
	}
	c.net.mu.Unlock()
	l, err := socket.Listen(c.listenHost())
	if err != nil {
		return err
	}
	defer l.Close()
	addrs, err := c.bs.AllGather(ctx, []byte(l.Addr(c.advertise())))
	if err != nil {
		return fmt.Errorf("comm: exchanging socket addresses: %w", err)
	}
	peers := map[int]string{}
	for r := range want {
		peers[r] = string(addrs[r])
	}
	conns, err := socket.Connect(ctx, l, c.rank, peers, c.bs.Config().ID.Secret)
	if err != nil {
		return fmt.Errorf("comm: rank %d: %w", c.rank, err)
	}
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.net.conns == nil {
		c.net.conns = map[int]*socket.Conn{}
	}
	for r, conn := range conns {
		c.net.conns[r] = conn
		c.net.serve.Add(1)
		go func() {
			defer c.net.serve.Done()
			if err := conn.Serve(dispatch{c: c, peer: r}); err != nil {
				c.fail(err)
			}
		}()
	}
	return nil
}

// SocketHostEnv names the address this rank listens on for its peers on
// other nodes (and that they dial); unset, it listens on every interface
// and advertises the address it reaches the bootstrap root from.
const SocketHostEnv = "MSCCL_SOCKET_HOST"

func (c *Comm) listenHost() string { return os.Getenv(SocketHostEnv) }

// advertise is the address peers on other nodes dial: MSCCL_SOCKET_HOST,
// else the local address of a route to the bootstrap's root (a UDP
// "connection" sends nothing; it only picks the interface), else
// loopback.
func (c *Comm) advertise() string {
	if h := os.Getenv(SocketHostEnv); h != "" {
		return h
	}
	if u, err := net.Dial("udp", c.bs.Config().ID.Addr); err == nil {
		defer u.Close()
		if a, ok := u.LocalAddr().(*net.UDPAddr); ok {
			return a.IP.String()
		}
	}
	return "127.0.0.1"
}

// fail records a failure of the job seen by this rank (a peer on another
// node whose connection broke or that sent what it may not).
func (c *Comm) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.closed {
		c.err = err
		close(c.dead)
	}
}

// NetConn is the socket connection to rank r (on another node), nil if
// no plan needed one.
func (c *Comm) NetConn(r int) *socket.Conn {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.net.conns[r]
}

func (c *Comm) closeNet() {
	c.net.mu.Lock()
	conns := c.net.conns
	c.net.conns = nil
	c.net.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
	}
	c.net.serve.Wait()
}
