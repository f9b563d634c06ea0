package cudaexec

import "github.com/msccl-go/msccl-go/runtime/cuda"

// Run on a caller's stream, as one graph launch.
//
// Ordered on a caller's stream, the fan-out (fanOut) is 1 + 4·ranks driver
// calls: the fork event, each rank's stream waiting on it, the launch, the
// rank's done event and the caller's stream waiting on that. The launches
// are the work; the 1 + 3·ranks event calls (about 0.5 µs each, 12.6 µs
// at 8 ranks on the H200 host: BenchmarkHostCost's run-stream) only
// order it. A CUDA graph of the same fan-out holds that order as edges,
// so one cuGraphLaunch on the caller's stream orders the kernels after
// the stream's earlier work and its later work after all of them, which
// is exactly what the events did. So each binding keeps its fan-out
// captured once (a Graph of its own, pinning nothing), and a Run on a
// caller's stream launches it: cuStreamIsCapturing, cuGraphLaunch and
// one cuEventRecord.
//
// What the events also gave, and is kept by hand: every collective of an
// executor ran on the ranks' own streams, so two collectives never
// overlapped (they share semaphores, channels and, per binding, scratch)
// and Wait, Release, evict and Close found all work there. A graph runs
// on streams of its own, so
//   - graphDone is recorded after each graph launch; syncRanks (Wait,
//     Release, evict, Close) waits for it beside the rank streams;
//   - work on the rank streams after a graph launch first waits on
//     graphDone (fanOut: once per switch, not per call);
//   - a graph launch after work on the rank streams first waits on that
//     work (rankTail: the ranks' done events, once per switch), and a
//     graph launch on another stream than the last one waits on
//     graphDone.
// Inside a caller's capture (a graph of the caller's) the events are
// captured as edges and cost nothing at replay, and none of the above
// applies to work that runs later: that path stays fanOut. Staged
// buffers (copies in and out with the caller's addresses) stay fanOut too.

// onStream enqueues work for every rank ordered on s: through the graph
// in *sg (captured on first use) when the work runs now, else fanOut.
func (e *Executor) onStream(s *cuda.Stream, sg **Graph, work func(r int, rs *rankRes) error) error {
	if s == nil {
		return e.fanOut(nil, work)
	}
	st, err := s.CaptureStatus()
	if err != nil {
		return err
	}
	if st != cuda.CaptureNone {
		if e.spread() {
			return spreadRefusal("Run inside a CUDA graph capture", e.devs.of)
		}
		return e.fanOut(s, work)
	}
	if e.spread() {
		// No graph of the fan-out: its capture would span the devices'
		// contexts (devices.go); the events order it as they did before.
		return e.fanOut(s, work)
	}
	if *sg == nil {
		g, err := e.streamGraph(work)
		if err != nil {
			return err
		}
		*sg = g
	}
	if e.rankTail {
		for _, rs := range e.ranks {
			if err := rs.done.Record(rs.stream); err != nil {
				return err
			}
			if err := s.WaitEvent(rs.done); err != nil {
				return err
			}
		}
		e.rankTail = false
	}
	if e.graphTail != nil && e.graphTail != s {
		if err := s.WaitEvent(e.graphDone); err != nil {
			return err
		}
	}
	if err := (*sg).ge.Launch(s); err != nil {
		return err
	}
	// Recorded on every launch, not when someone asks: by then s may be
	// destroyed by its owner or capturing, and an event recorded into a
	// capture can never be waited for outside it.
	if err := e.graphDone.Record(s); err != nil {
		return err
	}
	e.graphTail = s
	return nil
}

// streamGraph captures fanOut(work) on the executor's own capture stream.
// The Graph pins no binding: its binding owns it and destroys it when
// freed.
func (e *Executor) streamGraph(work func(r int, rs *rankRes) error) (*Graph, error) {
	if e.capStream == nil {
		s, err := cuda.NewStream(true)
		if err != nil {
			return nil, err
		}
		e.capStream = s
	}
	if e.graphDone == nil {
		ev, err := cuda.NewEvent(false)
		if err != nil {
			return nil, err
		}
		e.graphDone = ev
	}
	return e.capture(e.capStream, func() error { return e.fanOut(e.capStream, work) })
}

// afterGraphs orders the rank streams after the last graph launch, before
// work is put on them (fanOut outside a capture).
func (e *Executor) afterGraphs() error {
	if e.graphTail == nil {
		return nil
	}
	for _, rs := range e.ranks {
		if err := rs.stream.WaitEvent(e.graphDone); err != nil {
			return err
		}
	}
	e.graphTail = nil
	return nil
}

// syncRanks waits until everything the executor enqueued is done: the
// rank streams and the last graph launch on a caller's stream.
func (e *Executor) syncRanks() error {
	// Every stream is waited for even after an error (Close goes on to
	// free what they use); the first error is the one reported.
	var first firstErr
	for _, rs := range e.ranks {
		if rs != nil && rs.stream != nil {
			first.keep(rs.do(rs.stream.Synchronize))
		}
	}
	if e.graphDone != nil {
		first.keep(e.graphDone.Synchronize())
	}
	if first.err == nil {
		e.rankTail, e.graphTail = false, nil
	}
	return first.err
}

// closeStreamGraphs frees the capture stream and graphDone (Close, after
// syncRanks and after every binding's graph is destroyed).
func (e *Executor) closeStreamGraphs(keep func(error)) {
	if e.capStream != nil {
		keep(e.capStream.Destroy())
		e.capStream = nil
	}
	if e.graphDone != nil {
		keep(e.graphDone.Destroy())
		e.graphDone = nil
	}
}
