package cudaexec

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Liveness of the node's ranks, as executor/host keeps it on the cpu
// device: the last word of each rank's sync region (comm.Connections.Pulse)
// is its pulse, which a goroutine of its process advances every
// pulsePeriod. When this rank's kernel hangs, the ranks whose pulse stood
// still for frozenAfter are named: a process stopped (SIGSTOP) or hung
// outside any kernel, told apart from one that merely waits. The pulse
// lives in device memory (the sync region is the cuda device's), so it is
// copied there from pinned host memory on a stream of its own, which
// waits for nothing else: no kernel of the ranks can hold it up.
const (
	pulsePeriod = 10 * time.Millisecond
	frozenAfter = 500 * time.Millisecond
	closedPulse = ^uint64(0) // an executor that closed: gone on purpose
)

type pulser struct {
	words  []cuda.DevicePtr // by rank: the pulse word as mapped here; 0 off node
	rank   int
	host   *cuda.HostMem // [0]: this rank's count; then one word per rank read back
	stream *cuda.Stream
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex // one user of the stream and the host words at a time
	beats  atomic.Uint64
}

// startPulse begins advancing this rank's pulse.
func startPulse(conns *comm.Connections, rank int) (*pulser, error) {
	p := &pulser{rank: rank, words: make([]cuda.DevicePtr, len(conns.Pulse)), stop: make(chan struct{})}
	for q, loc := range conns.Pulse {
		if loc.Mem == nil {
			continue
		}
		w, err := devPtr(loc)
		if err != nil {
			return nil, fmt.Errorf("rank %d's pulse: %w", q, err)
		}
		p.words[q] = w
	}
	var err error
	if p.host, err = cuda.HostAllocMapped(int64(8 * (1 + len(p.words)))); err != nil {
		return nil, err
	}
	if p.stream, err = cuda.NewStream(true); err != nil {
		p.host.Free()
		return nil, err
	}
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// run copies the next count to this rank's pulse word each period,
// unless the last copy has not landed yet (then the pulse stands still,
// as it should for a process the GPU does not serve).
func (p *pulser) run() {
	defer p.wg.Done()
	// Its stream query, at any moment, must not invalidate a graph
	// capture the application runs on another thread in global mode
	// (torch.cuda.graph's default), as a query from a thread in that mode
	// would: the pulse's thread is relaxed (a driver without the call
	// has no graphs to spoil).
	defer relaxThread()()
	t := time.NewTicker(pulsePeriod)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		if done, err := p.stream.Query(); err == nil && done {
			atomic.StoreUint64(p.host.Word(0), p.beats.Add(1))
			cuda.MemcpyAsync(p.words[p.rank], p.host.Dev, 8, p.stream)
		}
		p.mu.Unlock()
	}
}

// read returns every node-local rank's pulse (closedPulse off node).
func (p *pulser) read() ([]uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, w := range p.words {
		if w != 0 {
			if err := cuda.MemcpyAsync(p.host.Dev+cuda.DevicePtr(8*(1+q)), w, 8, p.stream); err != nil {
				return nil, err
			}
		}
	}
	if err := p.stream.Synchronize(); err != nil {
		return nil, err
	}
	out := make([]uint64, len(p.words))
	for q, w := range p.words {
		out[q] = closedPulse
		if w != 0 {
			out[q] = atomic.LoadUint64(p.host.Word(int64(8 * (1 + q))))
		}
	}
	return out, nil
}

// frozen returns the node's other ranks whose pulse stood still for
// frozenAfter (nil when the pulses cannot be read).
func (p *pulser) frozen() []int {
	before, err := p.read()
	if err != nil {
		return nil
	}
	time.Sleep(frozenAfter)
	after, err := p.read()
	if err != nil {
		return nil
	}
	var out []int
	for q := range before {
		if q != p.rank && before[q] != closedPulse && after[q] == before[q] {
			out = append(out, q)
		}
	}
	return out
}

// close stops the pulse and marks this rank closed (so peers that hang
// later do not call it frozen), then frees the stream and host words.
func (p *pulser) close() error {
	close(p.stop)
	p.wg.Wait()
	atomic.StoreUint64(p.host.Word(0), closedPulse)
	err := cuda.MemcpyAsync(p.words[p.rank], p.host.Dev, 8, p.stream)
	if e := p.stream.Synchronize(); err == nil {
		err = e
	}
	if e := p.stream.Destroy(); err == nil {
		err = e
	}
	if e := p.host.Free(); err == nil {
		err = e
	}
	return err
}

// frozenNote names frozen ranks as executor/host does.
func frozenNote(ranks []int) string {
	who := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ranks)), ", "), "[]")
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %s shows no sign of life (its process is stopped or hung)", who)
	}
	return fmt.Sprintf("ranks %s show no sign of life (their processes are stopped or hung)", who)
}
