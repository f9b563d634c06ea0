package main

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

var (
	//go:embed pingpong.cu
	pingpongSrc string
	//go:embed bandwidth.cu
	bandwidthSrc string
	//go:embed port_bandwidth.cu
	portBandwidthSrc string
	//go:embed overlap.cu
	overlapSrc string
	//go:embed pattern.cu
	patternSrc string
)

// maxBytes is the largest transfer: the bandwidth table's last row and
// half of each rank's buffer.
const maxBytes = 256 << 20

// example is one rank's state: its buffer (the first maxBytes hold what
// it sends, the second what it receives), the channels to the peer over
// it, and the compiled kernels.
type example struct {
	ctx     context.Context
	rc      *msccl.RankComm
	r, peer int
	buf     *msccl.Buffer
	// scratch: the ping-pong's time at 0, the grid barrier at 64, the
	// check's counters at 128.
	scratch *msccl.Buffer
	ch      *msccl.Handles // memory channel, src and dst: buf
	chPkt   *msccl.Handles // memory channel whose packets land in a buffer of their own
	port    *msccl.Handles // port channel over buf; nil where PortChannels was refused
	portWhy string         // why it was refused

	pp, bw, pbw, ov, pat *msccl.Kernel
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "primitives:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	rc, err := msccl.OpenComm(ctx, msccl.CommOptions{Device: "cuda"})
	if err != nil {
		return err
	}
	err = runRank(ctx, rc)
	return errors.Join(err, rc.Close())
}

func runRank(ctx context.Context, rc *msccl.RankComm) (err error) {
	if rc.Size() != 2 {
		return fmt.Errorf("run it as 2 ranks (this job has %d)", rc.Size())
	}
	e := &example{ctx: ctx, rc: rc, r: rc.Rank(), peer: 1 - rc.Rank()}
	// On failure, the peer's next step fails quoting this rank's reason
	// (Fail) instead of waiting for it; then everything is closed in
	// reverse, and a failure to close (a port proxy that would not stop)
	// is the run's too.
	var closers []func() error
	defer func() {
		if err != nil {
			rc.Fail(err)
		}
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	buffer := func(size int64) (*msccl.Buffer, error) {
		b, err := rc.AllocBuffer(size)
		if err == nil {
			closers = append(closers, b.Close)
		}
		return b, err
	}
	register := func(b *msccl.Buffer) (*msccl.Registration, error) {
		reg, err := rc.Register(ctx, b.Mem())
		if err == nil {
			closers = append(closers, reg.Close)
		}
		return reg, err
	}
	channels := func(local, remote *msccl.Registration) (*msccl.Handles, error) {
		h, err := rc.MemoryChannels(ctx, []int{e.peer}, local, remote)
		if err == nil {
			closers = append(closers, h.Close)
		}
		return h, err
	}
	if e.buf, err = buffer(2 * maxBytes); err != nil {
		return err
	}
	reg, err := register(e.buf)
	if err != nil {
		return err
	}
	if e.ch, err = channels(reg, reg); err != nil {
		return err
	}
	// Packets land in a buffer of their own, twice the payload: unpacked
	// into buf, they must not share bytes with it (a block's payload
	// would overwrite packets another block still waits for).
	pkt, err := buffer(2 * maxBytes)
	if err != nil {
		return err
	}
	pktReg, err := register(pkt)
	if err != nil {
		return err
	}
	if e.chPkt, err = channels(reg, pktReg); err != nil {
		return err
	}
	if e.port, err = rc.PortChannels(ctx, []int{e.peer}, reg, reg, nil); err != nil {
		// A refusal is agreed by every rank (each gets the same error),
		// so both go on without the column; any other failure is one.
		if e.portWhy = portRefusal(err); e.portWhy == "" {
			return err
		}
		e.port = nil
	} else {
		closers = append(closers, e.port.Close)
	}
	if e.scratch, err = buffer(4096); err != nil {
		return err
	}
	for _, k := range []struct {
		k         **msccl.Kernel
		src, name string
	}{
		{&e.pp, pingpongSrc, "pingpong"}, {&e.bw, bandwidthSrc, "bandwidth"},
		{&e.pbw, portBandwidthSrc, "port_bandwidth"}, {&e.ov, overlapSrc, "overlap"}, {&e.pat, patternSrc, "pattern"},
	} {
		if *k.k, err = msccl.CompileKernel(k.src, k.name, msccl.KernelOptions{}); err != nil {
			return err
		}
	}
	if err := e.pingpong(); err != nil {
		return err
	}
	if err := e.bandwidth(); err != nil {
		return err
	}
	return e.overlap()
}

// pingpong prints the round trip of a signal over the memory channel.
func (e *example) pingpong() error {
	const rounds = 1000
	if err := e.barrier("the ping-pong"); err != nil {
		return err
	}
	var ns [8]byte
	first := int32(1 - e.r) // rank 0 signals first, rank 1 answers
	err := e.rc.Do(func() error {
		if err := e.pp.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, e.ch, first, int32(rounds), e.scratch.DevicePtr()); err != nil {
			return err
		}
		if err := cuda.StreamOf(0).Synchronize(); err != nil {
			return err
		}
		return cuda.MemcpyDtoH(ns[:], e.scratch.DevicePtr())
	})
	if err != nil {
		return err
	}
	if err := e.ch.Check(); err != nil {
		return err
	}
	if e.r == 0 {
		fmt.Printf("ping-pong over a memory channel: %d round trips, %.2f us each\n\n", rounds, float64(binary.LittleEndian.Uint64(ns[:]))/rounds/1e3)
	}
	return nil
}

// portRefusal is the reason of err when it is PortChannels' refusal,
// which every rank gets alike (the communicator agrees on it before
// building anything), one line per rank joined with "; "; "" for any
// other error.
func portRefusal(err error) string {
	const mark = "PortChannels refused: "
	s := err.Error()
	i := strings.Index(s, mark)
	if i < 0 {
		return ""
	}
	return strings.ReplaceAll(s[i+len(mark):], "\n", "; ")
}

// recv is where this rank receives: the second half of its buffer.
func (e *example) recv() msccl.DevicePtr { return e.buf.DevicePtr() + maxBytes }
