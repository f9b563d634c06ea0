package main

import (
	"fmt"
	"time"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The bandwidth table's modes: bandwidth.cu's MODE_ numbers, then the
// driver's device-to-device copy and the port channel's kernel.
const (
	modePut = iota
	modeGet
	modePackets
	modeCopy
	modeMemcpy
	modePort
	nModes
)

var modeNames = [nModes]string{"put", "get", "LL16", "copy", "cuMemcpyAsync", "port putWithSignal"}

// bandwidthIters is how many launches each figure of the table times.
const bandwidthIters = 20

// bandwidth prints, from 1 KiB to maxBytes, the rate of a put, a get and
// LL16 packets over the memory channel, a device copy within the rank's
// own buffer by the same kernel and grid (the yardstick: put/copy and
// get/copy are the channel's fraction of it) and by the driver
// (cuMemcpyAsync: what the GPU's memory allows a copy), and a
// putWithSignal over the port channel ("-" where PortChannels was
// refused). Every figure's data is checked on the rank that received it.
func (e *example) bandwidth() error {
	if e.r == 0 {
		if e.port == nil {
			fmt.Printf("port channels: refused, so the port column is \"-\": %s\n\n", e.portWhy)
		}
		fmt.Printf("%-10s %10s %10s %10s %10s %10s %9s %9s %10s\n", "bytes", "put GB/s", "get GB/s", "LL16 GB/s", "copy GB/s", "DtoD GB/s", "put/copy", "get/copy", "port GB/s")
	}
	flag := uint32(0)
	for size := int64(1 << 10); size <= maxBytes; size *= 4 {
		var gbs [nModes]float64
		for mode := range nModes {
			if mode == modePort && e.port == nil {
				continue
			}
			d, err := e.bandwidthMode(mode, size, &flag)
			if err != nil {
				return err
			}
			gbs[mode] = float64(size) / d.Seconds() / 1e9
		}
		if e.r == 0 {
			port := "-"
			if e.port != nil {
				port = fmt.Sprintf("%.2f", gbs[modePort])
			}
			fmt.Printf("%-10d %10.2f %10.2f %10.2f %10.2f %10.2f %9.3f %9.3f %10s\n", size, gbs[modePut], gbs[modeGet], gbs[modePackets], gbs[modeCopy],
				gbs[modeMemcpy], gbs[modePut]/gbs[modeCopy], gbs[modeGet]/gbs[modeCopy], port)
		}
	}
	return nil
}

// bandwidthMode times one mode at size and checks what this rank
// received: the peer's data, or its own for the copy. flag counts the
// launches (the packets' flags).
func (e *example) bandwidthMode(mode int, size int64, flag *uint32) (time.Duration, error) {
	what := fmt.Sprintf("%s of %d bytes", modeNames[mode], size)
	if err := e.prepare(what, size, seed(e.r, mode, size)); err != nil {
		return 0, err
	}
	var launch func() error
	switch mode {
	case modePort:
		launch = func() error {
			return e.pbw.Launch(0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, e.port, uint64(maxBytes), uint64(size))
		}
	case modeMemcpy:
		launch = func() error { return cuda.MemcpyAsync(e.recv(), e.buf.DevicePtr(), size, cuda.StreamOf(0)) }
	default:
		c := e.ch
		if mode == modePackets {
			c = e.chPkt
		}
		blocks := uint32(min(max(size/(64<<10), 1), 64))
		syncer, watch := e.scratch.DevicePtr()+64, e.ch.Watch()
		launch = func() error {
			*flag++
			return e.bw.Launch(0, [3]uint32{blocks, 1, 1}, [3]uint32{512, 1, 1}, c, syncer, watch, int32(mode), uint64(size), uint64(maxBytes), *flag)
		}
	}
	d, err := e.timed(bandwidthIters, launch)
	if err != nil {
		return 0, fmt.Errorf("rank %d: %s: %w", e.r, what, err)
	}
	from := e.peer
	if mode == modeCopy || mode == modeMemcpy {
		from = e.r
	}
	return d, e.verify(what, e.recv(), size/4, seed(from, mode, size), 1, 0)
}
