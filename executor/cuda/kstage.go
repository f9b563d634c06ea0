package cudaexec

import (
	"fmt"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// In-kernel staging. A collective on the caller's buffers copies its
// input into the rank's registered input before the plan runs and its
// output back after. Queued as copy-engine copies around the launch, each
// call is copy -> kernel -> copy on the stream, and the copy engine's
// latency is paid twice (about 18 us of a 32 us 1 KiB allreduce on an
// H100). A RankExecutor opened with Options.StageInKernel runs the
// kernel's _stage instance instead, which takes the copies as a
// by-value parameter (kernels.Stage) and makes them itself: a prologue
// (every block copies its share of the input spans, then a grid barrier)
// and an epilogue (a grid barrier after the plan's ops, a fence, then
// every block copies its share of the output spans). The launch stays one
// kernel node with no upload, so a graph capture records it whole.
//
// The grid barrier needs every block of the rank resident at once, which
// bind already demands of every plan (residentError: blocks wait for each
// other's barriers and for peers). Its word is a generation counter that
// only grows, so launches and graph replays need no reset.

// Span is one staging copy: N bytes from Src to Dst, device addresses of
// this process.
type Span struct{ Dst, Src, N uint64 }

// Staging is what the kernel copies in one launch: In before the plan's
// ops, Out after them. At most kernels.StageSpans each way.
type Staging struct{ In, Out []Span }

// InputInKernel reports whether rank's input may be staged by its own
// kernel's prologue, and if not, why. The prologue's writes are ordered
// only for this rank's blocks (the grid barrier), while a peer may read
// or write a buffer of this rank as soon as its own kernel starts,
// whatever this rank's kernel is doing; a copy-engine copy queued ahead
// of the kernel is over before anything of the launch runs. So the input
// is staged in the kernel only when no rank reaches this rank's input
// (its remote buffers, or a switch channel over inputs), nor, for an
// in-place plan whose input and output are one registered buffer, its
// output. The output needs no such rule: every write into it is ordered
// before the end of this rank's own blocks' ops by their waits
// (docs/model.md), and the epilogue starts after all of them.
func InputInKernel(p *ir.Plan, rank int) (bool, string) {
	touched := []ir.BufferType{ir.BufInput}
	if p.InPlace {
		touched = append(touched, ir.BufOutput)
	}
	for r := range p.GPUs {
		g := &p.GPUs[r]
		for i, rb := range g.RemoteBuffers {
			for _, t := range touched {
				if rb.Rank == rank && rb.Type == t && r != rank {
					return false, fmt.Sprintf("gpus[%d].remote_buffers[%d] is rank %d's %s", r, i, rank, t.Long())
				}
			}
		}
		for i, c := range g.Channels {
			if c.Type != ir.ChanSwitch {
				continue
			}
			for _, t := range touched {
				if c.BufferType == t && inGroups(c.RankGroups, rank) {
					return false, fmt.Sprintf("gpus[%d].channels[%d] is a switch channel over rank %d's %s", r, i, rank, t.Long())
				}
			}
		}
	}
	return true, ""
}

func inGroups(gs []ir.RankGroup, rank int) bool {
	for _, g := range gs {
		for _, r := range g.Ranks {
			if r == rank {
				return true
			}
		}
	}
	return false
}

// SplitStaging divides a call's copies between the kernel and the copy
// engine: the kernel takes the output spans when outputOK (false: the
// caller stages with copies only), and the input spans when inputOK
// (InputInKernel), each as long as there are at most
// kernels.StageSpans of them; the rest are copied before the launch
// (before) and after it (after). Empty spans are dropped; the results
// may share ins and outs.
func SplitStaging(ins, outs []Span, inputOK, outputOK bool) (kernel Staging, before, after []Span) {
	ins, outs = nonEmpty(ins), nonEmpty(outs)
	if inputOK && len(ins) <= kernels.StageSpans {
		kernel.In = ins
	} else {
		before = ins
	}
	if outputOK && len(outs) <= kernels.StageSpans {
		kernel.Out = outs
	} else {
		after = outs
	}
	return kernel, before, after
}

// nonEmpty is s without its empty spans: s itself when none is empty
// (every call of a communicator splits its spans here, and the common
// case should not copy them again), else a new slice.
func nonEmpty(s []Span) []Span {
	if len(s) == 0 {
		return nil
	}
	for i, x := range s {
		if x.N == 0 {
			out := append([]Span(nil), s[:i]...)
			for _, y := range s[i+1:] {
				if y.N > 0 {
					out = append(out, y)
				}
			}
			return out
		}
	}
	return s
}

// InputInKernel is InputInKernel for this executor's rank (decided once,
// at OpenRank); false when it was not opened with StageInKernel.
func (e *RankExecutor) InputInKernel() bool { return e.k.opt.StageInKernel && e.stageIn }

// EnqueueStaged is Enqueue with st copied by the kernel (see Staging):
// the executor must have been opened with StageInKernel, st.In must be
// empty unless InputInKernel, each In span must land in b's input and
// each Out span come from b's output.
func (e *RankExecutor) EnqueueStaged(b *RankBuffers, dt ir.DType, red ir.ReduceOp, ll int, s *cuda.Stream, st Staging) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.packStage(b, st); err != nil {
		return err
	}
	defer func() { e.stage.NIn, e.stage.NOut = 0, 0 }()
	return e.enqueue(b, dt, red, ll, s)
}

// packStage checks st against b and writes it into e.stage, the
// parameter the next launch passes.
func (e *RankExecutor) packStage(b *RankBuffers, st Staging) error {
	if !e.k.opt.StageInKernel {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: rank %d: staging in the kernel needs an executor opened with StageInKernel", e.rank)
	}
	if len(st.In) > kernels.StageSpans || len(st.Out) > kernels.StageSpans {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: rank %d: %d input and %d output staging spans; the kernel takes at most %d each way", e.rank, len(st.In), len(st.Out), kernels.StageSpans)
	}
	if len(st.In) > 0 && !e.stageIn {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: rank %d: the input cannot be staged in the kernel: %s", e.rank, e.stageInWhy)
	}
	if b == nil || b.e != e || b.freed {
		return diag.Errorc(diag.CodeBroken, "cudaexec: Run on buffers this executor did not allocate, or freed ones")
	}
	in, out := uint64(b.Input()), uint64(b.Output())
	for i, x := range st.In {
		if x.Dst < in || x.Dst+x.N > in+uint64(b.in) || x.Dst+x.N < x.Dst {
			return diag.Errorc(diag.CodeBadOptions, "cudaexec: rank %d: input staging span %d (%d bytes to %#x) is outside the %d-byte input at %#x", e.rank, i, x.N, x.Dst, b.in, in)
		}
		e.stage.In[i] = kernels.StageSpan{Dst: x.Dst, Src: x.Src, N: x.N}
	}
	for i, x := range st.Out {
		if x.Src < out || x.Src+x.N > out+uint64(b.out) || x.Src+x.N < x.Src {
			return diag.Errorc(diag.CodeBadOptions, "cudaexec: rank %d: output staging span %d (%d bytes from %#x) is outside the %d-byte output at %#x", e.rank, i, x.N, x.Src, b.out, out)
		}
		e.stage.Out[i] = kernels.StageSpan{Dst: x.Dst, Src: x.Src, N: x.N}
	}
	e.stage.NIn, e.stage.NOut = uint32(len(st.In)), uint32(len(st.Out))
	return nil
}
