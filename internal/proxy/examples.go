package proxy

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
)

// Counter wraps Next (nil: Default) and counts, per peer, the triggers,
// the bytes put and the time Next took: a handler that observes and
// leaves the work to the one it wraps.
type Counter struct {
	Next Handler

	mu    sync.Mutex
	peers map[int]*PeerStats
}

// PeerStats are a Counter's figures for one peer.
type PeerStats struct {
	Peer          int
	Triggers      int64
	Bytes         int64
	Total, Max    time.Duration // time in the wrapped handler
	Puts, Signals int64
}

func (c *Counter) HandleTrigger(t Trigger) Result {
	start := time.Now()
	var r Result
	if c.Next != nil {
		r = c.Next.HandleTrigger(t)
	} else {
		r = t.Default()
	}
	d := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers == nil {
		c.peers = map[int]*PeerStats{}
	}
	s := c.peers[t.Peer]
	if s == nil {
		s = &PeerStats{Peer: t.Peer}
		c.peers[t.Peer] = s
	}
	s.Triggers++
	s.Bytes += int64(t.Bytes)
	s.Total += d
	s.Max = max(s.Max, d)
	if t.Kind&Put != 0 {
		s.Puts++
	}
	if t.Kind&Signal != 0 {
		s.Signals++
	}
	return r
}

// Stats returns the figures by peer, in peer order.
func (c *Counter) Stats() []PeerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PeerStats, 0, len(c.peers))
	for _, s := range c.peers {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}

// AddF32 is a handler the default cannot be: a put adds its source, read
// as little-endian float32s, into the destination (dst[i] += src[i])
// instead of overwriting it, through a staging buffer of the proxy's own
// (the destination is read once, summed there and written back in one
// copy), and then signals. A reduction thus happens on the host, on the
// way between two ranks. Packet puts and sizes that are not whole float32s
// are refused with an error naming the trigger.
type AddF32 struct {
	staging []byte
}

func (a *AddF32) HandleTrigger(t Trigger) Result {
	if t.Kind&Put == 0 {
		t.RaiseSignal()
		return Result{}
	}
	if t.Src == nil || t.Packets || len(t.Src)%4 != 0 || len(t.Dst) != len(t.Src) {
		return Result{Err: fmt.Errorf("AddF32 cannot add %s: it adds whole float32s of plain (not LL packet) puts in host memory (the cpu device)", t)}
	}
	if cap(a.staging) < len(t.Dst) {
		a.staging = make([]byte, len(t.Dst))
	}
	st := a.staging[:len(t.Dst)]
	copy(st, t.Dst)
	for i := 0; i < len(st); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(st[i:]))
		y := math.Float32frombits(binary.LittleEndian.Uint32(t.Src[i:]))
		binary.LittleEndian.PutUint32(st[i:], math.Float32bits(x+y))
	}
	copy(t.Dst, st)
	t.RaiseSignal()
	return Result{}
}
