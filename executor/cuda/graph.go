package cudaexec

import (
	"errors"
	"runtime"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Graph is one collective captured into a CUDA graph: replaying it reruns
// the collective on the same buffers with whatever they hold then, at the
// cost of one driver call instead of 1 + 4·ranks.
type Graph struct {
	e   *Executor
	key bindKey
	s   *cuda.Stream
	g   *cuda.Graph
	ge  *cuda.GraphExec
}

// Capture records Run(c) into a graph on c.Stream (required: capture needs
// an origin stream) and instantiates it. The graph points at the scratch
// and op tables bound to c's buffers, so that binding is pinned — never
// evicted for another — until the graph is destroyed.
func (e *Executor) Capture(c Call) (*Graph, error) {
	if c.Stream == nil {
		return nil, errors.New("cudaexec: Capture needs Call.Stream")
	}
	if e.spread() {
		return nil, spreadRefusal("CUDA graph capture", e.devs.of)
	}
	// A staged buffer set runs the plan on its stage: that is the binding
	// the graph pins (Run adds the copies in and out).
	bc := c
	if c.Buffers != nil && c.Buffers.stage != nil {
		if err := e.checkStaged(c.Buffers, c.DType); err != nil {
			return nil, err
		}
		bc.Buffers = c.Buffers.stage
	}
	b, err := e.bind(&bc)
	if err != nil {
		return nil, err
	}
	g, err := e.capture(c.Stream, func() error { return e.Run(c) })
	if err != nil {
		return nil, err
	}
	b.pins++
	g.key = e.keyOf(&bc)
	return g, nil
}

// capture records what run enqueues on s into an instantiated graph.
func (e *Executor) capture(s *cuda.Stream, run func() error) (*Graph, error) {
	// Capture mode is per thread in the driver's bookkeeping of the
	// current context; keep the goroutine on one thread throughout.
	runtime.LockOSThread()
	if err := s.BeginCapture(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	rerr := run()
	g, err := s.EndCapture()
	runtime.UnlockOSThread()
	if rerr != nil {
		if g != nil {
			g.Destroy()
		}
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	ge, err := g.Instantiate()
	if err != nil {
		g.Destroy()
		return nil, err
	}
	return &Graph{e: e, s: s, g: g, ge: ge}, nil
}

// Launch replays the graph on the stream it was captured on.
func (g *Graph) Launch() error {
	if g.e.broken != nil {
		return g.e.brokenErr()
	}
	return g.ge.Launch(g.s)
}

// Destroy frees the graph and unpins its binding.
func (g *Graph) Destroy() error {
	if g == nil || g.ge == nil {
		return nil
	}
	err := g.ge.Destroy()
	if err2 := g.g.Destroy(); err == nil {
		err = err2
	}
	g.ge, g.g = nil, nil
	if b := g.e.binds[g.key]; b != nil && b.pins > 0 {
		b.pins--
	}
	return err
}

// evict frees the oldest unpinned binding once maxBindings are cached,
// after the work that may use it is done. When every binding is pinned by
// a graph the cache grows instead.
func (e *Executor) evict() error {
	if len(e.order) < maxBindings {
		return nil
	}
	for i, k := range e.order {
		ob := e.binds[k]
		if ob != nil && ob.pins > 0 {
			continue
		}
		if err := e.syncRanks(); err != nil {
			return err
		}
		if ob != nil {
			ob.free()
		}
		e.last = nil
		delete(e.binds, k)
		e.order = append(e.order[:i], e.order[i+1:]...)
		return nil
	}
	return nil
}

// Release frees the scratch and op tables bound to bufs (for every type
// and reduction), after the work in flight. Call it before freeing buffers
// that were wrapped, or to return device memory early; graphs captured on
// bufs must be destroyed first.
func (e *Executor) Release(bufs *Buffers) error {
	pk := ptrKey(bufs)
	if err := e.syncRanks(); err != nil {
		return err
	}
	keep := e.order[:0]
	var first error
	for _, k := range e.order {
		b := e.binds[k]
		if k.ptrs != pk || b == nil {
			keep = append(keep, k)
			continue
		}
		if b.pins > 0 {
			keep = append(keep, k)
			if first == nil {
				first = errors.New("cudaexec: Release of buffers a live graph was captured on")
			}
			continue
		}
		if err := b.free(); err != nil && first == nil {
			first = err
		}
		e.last = nil
		delete(e.binds, k)
	}
	e.order = keep
	return first
}
