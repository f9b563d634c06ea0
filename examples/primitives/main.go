package main

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

//go:embed pingpong.cu
var pingpongSrc string

//go:embed bandwidth.cu
var bandwidthSrc string

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
	defer rc.Close()
	if rc.Size() != 2 {
		return fmt.Errorf("run it as 2 ranks (this job has %d)", rc.Size())
	}
	r := rc.Rank()
	const maxBytes = 256 << 20
	buf, err := rc.AllocBuffer(maxBytes)
	if err != nil {
		return err
	}
	defer buf.Close()
	reg, err := rc.Register(ctx, buf.Mem())
	if err != nil {
		return err
	}
	defer reg.Close()
	ch, err := rc.MemoryChannels(ctx, []int{1 - r}, reg, reg)
	if err != nil {
		return err
	}
	defer ch.Close()
	// Packets land in a buffer of their own, twice the payload: unpacked
	// into buf, they must not share bytes with it (a block's payload
	// would overwrite packets another block still waits for).
	pkt, err := rc.AllocBuffer(2 * maxBytes)
	if err != nil {
		return err
	}
	defer pkt.Close()
	pktReg, err := rc.Register(ctx, pkt.Mem())
	if err != nil {
		return err
	}
	defer pktReg.Close()
	chPkt, err := rc.MemoryChannels(ctx, []int{1 - r}, reg, pktReg)
	if err != nil {
		return err
	}
	defer chPkt.Close()
	scratch, err := rc.AllocBuffer(4096) // ping-pong times, the grid barrier
	if err != nil {
		return err
	}
	defer scratch.Close()
	pp, err := msccl.CompileKernel(pingpongSrc, "pingpong", msccl.KernelOptions{})
	if err != nil {
		return err
	}
	bw, err := msccl.CompileKernel(bandwidthSrc, "bandwidth", msccl.KernelOptions{})
	if err != nil {
		return err
	}
	sync := func() error { return rc.Do(func() error { return cuda.StreamOf(0).Synchronize() }) }

	const rounds = 1000
	if err := rc.Do(func() error {
		return pp.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, ch, int32(1-r), int32(rounds), scratch.DevicePtr())
	}); err != nil {
		return err
	}
	if err := sync(); err != nil {
		return err
	}
	if err := ch.Check(); err != nil {
		return err
	}
	var ns [8]byte
	if err := rc.Do(func() error { return cuda.MemcpyDtoH(ns[:], scratch.DevicePtr()) }); err != nil {
		return err
	}
	if r == 0 {
		fmt.Printf("ping-pong over a memory channel: %d round trips, %.2f us each\n\n", rounds, float64(binary.LittleEndian.Uint64(ns[:]))/rounds/1e3)
		fmt.Printf("%-10s %12s %12s %12s\n", "bytes", "put GB/s", "get GB/s", "LL16 GB/s")
	}
	// The watchdog of the grid barrier: the handles' own records.
	watch := ch.Watch()
	syncer := scratch.DevicePtr() + 64
	flag := uint32(0)
	for size := int64(1 << 10); size <= maxBytes; size *= 4 {
		var gbs [3]float64
		for mode := range 3 {
			blocks := uint32(min(max(size/(64<<10), 1), 64))
			start := time.Now()
			const iters = 20
			c := ch
			if mode == 2 {
				c = chPkt
			}
			for range iters {
				flag++
				if err := rc.Do(func() error {
					return bw.Launch(0, [3]uint32{blocks, 1, 1}, [3]uint32{512, 1, 1}, c, syncer, watch, int32(mode), uint64(size), flag)
				}); err != nil {
					return err
				}
			}
			if err := sync(); err != nil {
				return err
			}
			gbs[mode] = float64(size) * iters / time.Since(start).Seconds() / 1e9
		}
		if err := errors.Join(ch.Check(), chPkt.Check()); err != nil {
			return err
		}
		if r == 0 {
			fmt.Printf("%-10d %12.2f %12.2f %12.2f\n", size, gbs[0], gbs[1], gbs[2])
		}
	}
	return nil
}
