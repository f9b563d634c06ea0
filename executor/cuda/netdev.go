package cudaexec

import (
	"errors"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// netDev is what the socket transport (netproxy.go, netrecv.go) needs of
// the device: pinned staging with an address copies can use, and
// streams of in-order copies between unified addresses with marks to
// wait for. cudaNet is the GPU's; the transport's CPU tests give it host
// memory, so its ordering, naming and teardown are tested without one.
type netDev interface {
	stage(n int) (*netStage, error)
	stream(marks int) (netStream, error)
}

// netStage is pinned host memory: host is what the proxy reads and
// writes, addr what copies address.
type netStage struct {
	host []byte
	addr uint64
	free func() error
}

type netStream interface {
	copy(dst, src uint64, n int64) error // queued behind the stream's earlier copies
	mark(i int) error                    // mark i: everything queued so far
	wait(i int) error                    // until mark i's copies are done
	sync() error                         // until every queued copy is done
	destroy() error
}

// cudaNet copies on non-blocking streams of the current (fallback)
// context through unified addressing: device memory and mapped pinned
// host memory alike.
type cudaNet struct{}

func (cudaNet) stage(n int) (*netStage, error) {
	h, err := cuda.HostAllocMapped(int64(n))
	if err != nil {
		return nil, err
	}
	return &netStage{host: h.Bytes, addr: uint64(h.Dev), free: h.Free}, nil
}

func (cudaNet) stream(marks int) (netStream, error) {
	s, err := cuda.NewStream(true)
	if err != nil {
		return nil, err
	}
	cs := &cudaStream{s: s}
	for range marks {
		ev, err := cuda.NewEvent(false)
		if err != nil {
			cs.destroy()
			return nil, err
		}
		cs.ev = append(cs.ev, ev)
	}
	return cs, nil
}

type cudaStream struct {
	s  *cuda.Stream
	ev []*cuda.Event
}

func (c *cudaStream) copy(dst, src uint64, n int64) error {
	return cuda.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, c.s)
}
func (c *cudaStream) mark(i int) error { return c.ev[i].Record(c.s) }
func (c *cudaStream) wait(i int) error { return c.ev[i].Synchronize() }
func (c *cudaStream) sync() error      { return c.s.Synchronize() }

func (c *cudaStream) destroy() error {
	errs := []error{c.s.Synchronize(), c.s.Destroy()}
	for _, ev := range c.ev {
		errs = append(errs, ev.Destroy())
	}
	return errors.Join(errs...)
}
