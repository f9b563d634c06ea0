package main

import (
	"encoding/binary"
	"fmt"
	"time"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The overlap example's shape: a put of overlapBytes to the peer by
// overlapCommBlocks blocks, beside an elementwise loop over overlapBytes
// of local data (as 32-bit words) by two blocks per SM.
const (
	overlapBytes      = 64 << 20
	overlapCommBlocks = 16
	overlapThreads    = 512
	overlapIters      = 20 // timed launches per figure
	// overlapRounds is the loop's first length, which the times of the
	// put and the loop alone then scale.
	overlapRounds = 64
)

// overlapRun is one way of running the example's work.
type overlapRun struct {
	name          string
	comm, compute bool // what it does, so what the check looks at
	// launches queues one instance of the work.
	launches func() error
}

// overlap times the put and the loop fused in one kernel against the two
// as kernels one after the other, and each alone; every run checks the
// data the peer put here and the loop's results.
func (e *example) overlap() error {
	out, err := e.rc.AllocBuffer(overlapBytes)
	if err != nil {
		return err
	}
	defer out.Close()
	// The GPUs of a node are alike: device 0 says how many SMs this
	// rank's has.
	sms, err := cuda.Device(0).Attribute(cuda.AttrMultiprocessorCount)
	if err != nil {
		return err
	}
	computeBlocks := uint32(2 * sms)
	rounds := overlapRounds
	syncer, watch := e.scratch.DevicePtr()+64, e.ch.Watch()
	launch := func(grid, commBlocks uint32) error {
		return e.ov.Launch(0, [3]uint32{grid, 1, 1}, [3]uint32{overlapThreads, 1, 1}, e.ch, syncer, watch,
			commBlocks, uint64(overlapBytes), uint64(maxBytes), e.buf.DevicePtr(), out.DevicePtr(), uint64(overlapBytes/4), int32(rounds))
	}
	commOnly := func() error { return launch(overlapCommBlocks, overlapCommBlocks) }
	computeOnly := func() error { return launch(computeBlocks, 0) }
	runs := []overlapRun{
		{"communication alone", true, false, commOnly},
		{"computation alone", false, true, computeOnly},
		{"one after the other", true, true, func() error {
			if err := commOnly(); err != nil {
				return err
			}
			return computeOnly()
		}},
		{"fused", true, true, func() error { return launch(overlapCommBlocks+computeBlocks, overlapCommBlocks) }},
	}
	// The loop's length makes the computation take about as long as the
	// put, where overlapping them can save the most; both ranks take the
	// larger of their two lengths.
	comm, err := e.overlapTime(runs[0], 0, out.DevicePtr(), rounds)
	if err != nil {
		return err
	}
	compute, err := e.overlapTime(runs[1], 1, out.DevicePtr(), rounds)
	if err != nil {
		return err
	}
	mine := min(max(int(float64(rounds)*comm.Seconds()/compute.Seconds()), 16), 1<<16)
	if rounds, err = e.agreeMax(mine); err != nil {
		return err
	}
	var times [4]time.Duration
	for i, run := range runs {
		if times[i], err = e.overlapTime(run, 2+i, out.DevicePtr(), rounds); err != nil {
			return err
		}
	}
	if e.r == 0 {
		fmt.Printf("\noverlap: a put of %d MiB to the peer (%d blocks) beside %d rounds of an elementwise multiply-add over %d MiB of local words (%d blocks)\n",
			overlapBytes>>20, overlapCommBlocks, rounds, overlapBytes>>20, computeBlocks)
		for i, run := range runs {
			fmt.Printf("%-22s %10.1f us\n", run.name, float64(times[i].Nanoseconds())/1e3)
		}
		fmt.Printf("%-22s %10.2f x\n", "separate / fused", times[2].Seconds()/times[3].Seconds())
	}
	return nil
}

// overlapTime times run (mode numbers its seed), whose loop runs rounds
// times, and checks its data.
func (e *example) overlapTime(run overlapRun, mode int, out msccl.DevicePtr, rounds int) (time.Duration, error) {
	what := "overlap, " + run.name
	s := seed(e.r, 8+mode, overlapBytes)
	if err := e.prepare(what, overlapBytes, s, out); err != nil {
		return 0, err
	}
	d, err := e.timed(overlapIters, run.launches)
	if err != nil {
		return 0, fmt.Errorf("rank %d: %s: %w", e.r, what, err)
	}
	if run.comm {
		if err := e.verify(what+": the peer's put", e.recv(), overlapBytes/4, seed(e.peer, 8+mode, overlapBytes), 1, 0); err != nil {
			return 0, err
		}
	}
	if run.compute {
		mul, add := lcgRounds(rounds)
		if err := e.verify(what+": the loop's results", out, overlapBytes/4, s, mul, add); err != nil {
			return 0, err
		}
	}
	return d, nil
}

// agreeMax is the larger of v and the peer's v.
func (e *example) agreeMax(v int) (int, error) {
	const tag = 1
	if err := e.rc.Send(e.ctx, e.peer, tag, binary.LittleEndian.AppendUint64(nil, uint64(v))); err != nil {
		return 0, fmt.Errorf("rank %d: overlap: %w", e.r, err)
	}
	b, err := e.rc.Recv(e.ctx, e.peer, tag)
	if err == nil && len(b) != 8 {
		err = fmt.Errorf("%d bytes from the peer, want 8", len(b))
	}
	if err != nil {
		return 0, fmt.Errorf("rank %d: overlap: the loop's length: %w", e.r, err)
	}
	return max(v, int(binary.LittleEndian.Uint64(b))), nil
}
