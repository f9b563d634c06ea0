package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// patternThreads and patternBlocks are the launch shape of pattern.cu
// (a grid-stride loop: any size).
const (
	patternThreads = 512
	patternBlocks  = 1024
)

// seed is the pattern rank r sends in mode (of the bandwidth table or the
// overlap example) at size: distinct for each, so that data a previous
// mode or size left behind fails the receiver's check.
func seed(r, mode int, size int64) uint32 {
	return uint32(r+1)*0x9e3779b1 ^ uint32(mode)<<24 ^ uint32(size>>10)*0x85ebca77
}

// lcgRounds is the affine map mod 2^32 of iters rounds of overlap.cu's
// x = x * 1664525 + 1013904223, composed here so that the check does not
// share the kernel's loop.
func lcgRounds(iters int) (mul, add uint32) {
	mul = 1
	for range iters {
		mul, add = mul*1664525, add*1664525+1013904223
	}
	return mul, add
}

// fill writes words of pattern seed at p, on the rank's stream.
func (e *example) fill(p msccl.DevicePtr, words int64, seed uint32) error {
	return e.rc.Do(func() error {
		return e.pat.Launch(0, [3]uint32{patternBlocks, 1, 1}, [3]uint32{patternThreads, 1, 1}, p, uint64(words), seed, uint32(1), uint32(0), int32(0), msccl.DevicePtr(0))
	})
}

// verify checks that the words at p hold mul * pattern(seed) + add (mul
// 1, add 0: the data as sent) once the rank's stream is done; the error
// says how many words differ and where the first is.
func (e *example) verify(what string, p msccl.DevicePtr, words int64, seed, mul, add uint32) error {
	var bad [16]byte
	binary.LittleEndian.PutUint64(bad[8:], ^uint64(0))
	err := e.rc.Do(func() error {
		if err := cuda.MemcpyHtoD(e.badPtr(), bad[:]); err != nil {
			return err
		}
		if err := e.pat.Launch(0, [3]uint32{patternBlocks, 1, 1}, [3]uint32{patternThreads, 1, 1}, p, uint64(words), seed, mul, add, int32(1), e.badPtr()); err != nil {
			return err
		}
		if err := cuda.StreamOf(0).Synchronize(); err != nil {
			return err
		}
		return cuda.MemcpyDtoH(bad[:], e.badPtr())
	})
	if err != nil {
		return fmt.Errorf("rank %d: checking %s: %w", e.r, what, err)
	}
	if n := binary.LittleEndian.Uint64(bad[:]); n != 0 {
		return fmt.Errorf("rank %d: %s: %d of %d received words are wrong, the first at byte %d", e.r, what, n, words, 4*binary.LittleEndian.Uint64(bad[8:]))
	}
	return nil
}

// badPtr is where pattern.cu counts the wrong words (scratch bytes
// 128..143).
func (e *example) badPtr() msccl.DevicePtr { return e.scratch.DevicePtr() + 128 }

// prepare fills the first bytes this rank sends with seed, clears where
// it receives them (and the extra buffers given), and waits for the
// peer to have done the same, so that neither side's data can reach the
// other before it is cleared.
func (e *example) prepare(what string, bytes int64, seed uint32, clear ...msccl.DevicePtr) error {
	if err := e.fill(e.buf.DevicePtr(), bytes/4, seed); err != nil {
		return fmt.Errorf("rank %d: %s: %w", e.r, what, err)
	}
	err := e.rc.Do(func() error {
		for _, p := range append(clear, e.recv()) {
			if err := cuda.Memset8(p, 0, bytes); err != nil {
				return err
			}
		}
		return cuda.StreamOf(0).Synchronize()
	})
	if err != nil {
		return fmt.Errorf("rank %d: %s: %w", e.r, what, err)
	}
	return e.barrier(what)
}

// barrier waits for the peer, as long as the bootstrap's step timeout
// (MSCCL_BOOTSTRAP_TIMEOUT, 30 s): a peer that failed or hung makes this
// rank fail, naming the step, instead of waiting forever.
func (e *example) barrier(what string) error {
	if err := e.rc.Barrier(e.ctx); err != nil {
		return fmt.Errorf("rank %d: waiting for the peer before %s: %w", e.r, what, err)
	}
	return nil
}

// timed runs launch once to warm up (the first launch loads the module),
// then iters times, and returns the time per launch once the stream is
// done; every timed launch is queued in one Do, so the host's cost per
// launch is a launch's, not a context switch's. A wait that timed out in
// the warm-up ends it there: every launch after it would wait as long.
func (e *example) timed(iters int, launch func() error) (time.Duration, error) {
	s := cuda.StreamOf(0)
	err := e.rc.Do(func() error {
		if err := launch(); err != nil {
			return err
		}
		return s.Synchronize()
	})
	if err == nil {
		err = e.checkHandles()
	}
	if err != nil {
		return 0, err
	}
	var d time.Duration
	err = e.rc.Do(func() error {
		start := time.Now()
		for range iters {
			if err := launch(); err != nil {
				return err
			}
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		d = time.Since(start) / time.Duration(iters)
		return nil
	})
	if err == nil {
		err = e.checkHandles()
	}
	return d, err
}

// checkHandles reports the waits of every channel's watchdog that timed
// out (a record stays: once one is written, every later check fails).
func (e *example) checkHandles() error {
	errs := []error{e.ch.Check(), e.chPkt.Check()}
	if e.port != nil {
		errs = append(errs, e.port.Check())
	}
	return errors.Join(errs...)
}
