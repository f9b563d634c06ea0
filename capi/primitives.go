package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"math"
	"unsafe"

	"github.com/msccl-go/msccl-go"
)

// Channels in a caller's own kernel (docs/primitives.md) across the ABI:
// buffers, registrations, handle arrays and compiled kernels are table
// handles like plans. Allocation, registration and its refusals, channel
// pairing and kernel compilation are the root package's (RankComm.
// AllocBuffer, Register, MemoryChannels, PortChannels, CompileKernel);
// this file converts arguments and results only.

// handlesEntry is a handle array. On the cpu device the array is a Go
// slice, which C may not keep: cimg is its copy in C memory, the address
// the caller is given, freed when the handle is released.
type handlesEntry struct {
	h    *msccl.Handles
	kind string
	cimg unsafe.Pointer
}

func (e *handlesEntry) Close() error {
	err := e.h.Close()
	if e.cimg != nil {
		C.free(e.cimg)
		e.cimg = nil
	}
	return err
}

// ptr is the array's address as the caller's kernel (cuda) or code (cpu)
// reads it.
func (e *handlesEntry) ptr() uint64 {
	if p := e.h.Ptr(); p != 0 {
		return uint64(p)
	}
	return uint64(uintptr(e.cimg))
}

func (t *handles) buffer(h int64) (*msccl.Buffer, error) {
	return get[*msccl.Buffer](t, h, "buffer")
}

func (t *handles) registration(h int64) (*msccl.Registration, error) {
	return get[*msccl.Registration](t, h, "registration")
}

func (t *handles) channels(h int64) (*handlesEntry, error) {
	return get[*handlesEntry](t, h, "handle array")
}

func (t *handles) kernel(h int64) (*msccl.Kernel, error) {
	return get[*msccl.Kernel](t, h, "kernel")
}

func allocBuffer(comm, size int64) (h int64, addr uint64, err error) {
	c, err := table.comm(comm)
	if err != nil {
		return 0, 0, err
	}
	if size <= 0 {
		return 0, 0, invalid("buffer size must be positive, got %d", size)
	}
	b, err := c.c.AllocBuffer(size)
	if err != nil {
		return 0, 0, err
	}
	return table.add(b), uint64(b.Addr()), nil
}

func register(comm int64, p unsafe.Pointer, n int64) (int64, error) {
	c, err := table.comm(comm)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, invalid("register: %d bytes", n)
	}
	// Memory that is not (the whole of) a buffer from AllocBuffer,
	// NULL included, is refused by Register on every rank alike, so
	// that no rank is left waiting in the exchange.
	r, err := c.c.Register(context.Background(), mem(c, p, n, false))
	if err != nil {
		return 0, err
	}
	return table.add(r), nil
}

// channelsInfo is the JSON of msccl_comm_channels: where the array is
// and what a kernel needs beside it.
type channelsInfo struct {
	Kind        string    `json:"kind"`
	Ptr         uint64    `json:"ptr"`
	Count       int       `json:"count"`
	HandleBytes int       `json:"handle_bytes"`
	Bytes       int       `json:"nbytes"`
	Device      string    `json:"device"`
	Watch       watchJSON `json:"watch"`
}

// watchJSON is msccl::Watch, for callers that build their own
// grid-barrier argument.
type watchJSON struct {
	Records   uint64 `json:"records"`
	TimeoutNs uint64 `json:"timeout_ns"`
	Rank      uint32 `json:"rank"`
	NRecords  uint32 `json:"nrecords"`
}

func buildChannels(comm int64, kind string, peers []int, local, remote int64) (int64, []byte, error) {
	c, err := table.comm(comm)
	if err != nil {
		return 0, nil, err
	}
	// A wrong handle on one rank must not leave the others waiting in
	// the agreement: a missing registration is passed on as nil, which
	// the root package refuses on every rank.
	l, _ := table.registration(local)
	r, _ := table.registration(remote)
	var hs *msccl.Handles
	switch kind {
	case "memory":
		hs, err = c.c.MemoryChannels(context.Background(), peers, l, r)
	case "port":
		hs, err = c.c.PortChannels(context.Background(), peers, l, r, nil)
	default:
		return 0, nil, invalid("channel kind %q: want \"memory\" or \"port\"", kind)
	}
	if err != nil {
		return 0, nil, err
	}
	e := &handlesEntry{h: hs, kind: kind}
	if img := hs.Bytes(); hs.Ptr() == 0 && len(img) > 0 {
		e.cimg = C.CBytes(img)
	}
	w := hs.Watch()
	info := channelsInfo{Kind: kind, Ptr: e.ptr(), Count: hs.Len(), Bytes: len(hs.Bytes()), Device: c.device,
		Watch: watchJSON{Records: w.Records, TimeoutNs: w.TimeoutNs, Rank: w.Rank, NRecords: w.NRecords}}
	if hs.Len() > 0 {
		info.HandleBytes = len(hs.Bytes()) / hs.Len()
	}
	return table.add(e), encodeJSON(info), nil
}

// checkChannels is Handles.Check; a wait the watchdog ended or a failed
// proxy is a run that failed.
func checkChannels(h int64) error {
	e, err := table.channels(h)
	if err != nil {
		return err
	}
	if err := e.h.Check(); err != nil {
		return &apiError{statusRun, err.Error()}
	}
	return nil
}

func compileKernel(src, name, arch, options string) (int64, error) {
	var opts []string
	if options != "" {
		if err := json.Unmarshal([]byte(options), &opts); err != nil {
			return 0, invalid("kernel options: want a JSON array of strings, got %q: %v", options, err)
		}
	}
	k, err := msccl.CompileKernel(src, name, msccl.KernelOptions{Arch: arch, Options: opts})
	if err != nil {
		return 0, err
	}
	return table.add(k), nil
}

// Argument kinds of msccl_kernel_launch, one letter each.
const kernelArgKinds = "iIlLfdbpw"

// launchArgs converts the C launch arguments (a kind letter and a 64-bit
// word each) to the typed values Kernel.Launch passes by value.
func launchArgs(kinds string, words []uint64) ([]any, error) {
	if len(kinds) != len(words) {
		return nil, invalid("%d argument kinds for %d arguments", len(kinds), len(words))
	}
	args := make([]any, len(words))
	for i, w := range words {
		switch kinds[i] {
		case 'i':
			args[i] = int32(w)
		case 'I':
			args[i] = uint32(w)
		case 'l':
			args[i] = int64(w)
		case 'L':
			args[i] = w
		case 'f':
			args[i] = math.Float32frombits(uint32(w))
		case 'd':
			args[i] = math.Float64frombits(w)
		case 'b':
			args[i] = w != 0
		case 'p':
			args[i] = msccl.DevicePtr(w)
		case 'w':
			e, err := table.channels(int64(w))
			if err != nil {
				return nil, invalid("argument %d (a watch): %v", i, err)
			}
			args[i] = e.h.Watch()
		default:
			return nil, invalid("argument %d has kind %q; want one of %q", i, kinds[i], kernelArgKinds)
		}
	}
	return args, nil
}

func launchKernel(k, comm int64, stream uint64, grid, block [3]uint32, kinds string, words []uint64) error {
	kern, err := table.kernel(k)
	if err != nil {
		return err
	}
	args, err := launchArgs(kinds, words)
	if err != nil {
		return err
	}
	for i := range 3 {
		if grid[i] == 0 || block[i] == 0 {
			return invalid("grid %v and block %v: every dimension must be at least 1", grid, block)
		}
	}
	launch := func() error { return kern.Launch(uintptr(stream), grid, block, args...) }
	if comm == 0 {
		return launch() // the calling thread's current context
	}
	c, err := table.comm(comm)
	if err != nil {
		return err
	}
	if c.device != "cuda" {
		return invalid("kernel %s: the communicator's device is %s; a kernel runs on cuda", kern.Name(), c.device)
	}
	return c.c.Do(launch)
}

// kernelImage is what NVRTC produced, as a C copy.
func kernelImage(k int64) ([]byte, error) {
	kern, err := table.kernel(k)
	if err != nil {
		return nil, err
	}
	return kern.Image(), nil
}

func includePath() (string, error) { return msccl.IncludePath() }
