package main

import (
	"fmt"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/internal/hostmem"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
)

// refMemoryPercent is the share of the host's available memory one CPU
// reference (-c) may use, so that the largest sizes of packet plans (whose
// scratch is several times the message) are checked rather than refused
// at the CPU executor's fixed 16 GiB default, while the references
// computed ahead in parallel and the GPU process itself still fit.
const refMemoryPercent = 60

// refBudget is that share (or $MSCCL_HOST_MEMORY, or a fixed 16 GiB where
// MemAvailable cannot be read). A bad $MSCCL_HOST_MEMORY was refused by
// checkRefMemory before this is called.
func refBudget() hostmem.Budget {
	b, _ := hostmem.NewBudget(refMemoryPercent)
	return b
}

// checkRefMemory refuses, before the GPU is opened, a sweep whose CPU
// reference at some size would not fit in host memory, naming both
// numbers: otherwise that row would be skipped after the sweep had run
// for minutes (or the kernel would end the process).
func checkRefMemory(p *ir.Plan, name string, sizes []int64) error {
	b, err := hostmem.NewBudget(refMemoryPercent)
	if err != nil {
		return err
	}
	for _, s := range sizes {
		need, err := cpu.BufferMemory(p, s, 1, false)
		if err != nil {
			continue // the executor words its own refusal in that row
		}
		if err := b.Check(fmt.Sprintf("-c: the CPU reference for %s at %s", name, size.Format(s)), need); err != nil {
			return fmt.Errorf("%w; lower -e or leave out -c", err)
		}
	}
	return nil
}

// checkHostDevice refuses, before any rank starts, a --device cpu sweep
// whose largest size does not fit in this host's memory: the CPU device
// keeps every rank's input, output and scratch in shared memory on this
// host, so a size past it would fill the machine instead of failing.
func checkHostDevice(p *ir.Plan, name string, sizes []int64) error {
	b, err := hostmem.NewBudget(refMemoryPercent)
	if err != nil {
		return err
	}
	largest := sizes[len(sizes)-1]
	need, err := deviceBytes(p, largest)
	if err != nil {
		return nil // checkSweep has refused sizes the plan cannot split
	}
	what := fmt.Sprintf("--device cpu: %s at %s (%d ranks' buffers in this host's shared memory)", name, size.Format(largest), len(p.GPUs))
	if err := b.Check(what, need); err != nil {
		return fmt.Errorf("%w; lower -e", err)
	}
	return nil
}
