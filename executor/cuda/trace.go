package cudaexec

import (
	"errors"
	"fmt"
	"sort"

	"github.com/msccl-go/msccl-go/internal/chrometrace"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// maxTrace bounds Options.Trace (records per block): 1M records of 24
// bytes is 24 MiB per block, more than any plan's op count needs.
const maxTrace = 1 << 20

// timeline is the device side of Options.Trace: per rank, one buffer of
// kernels.TraceBlockBytes(Trace) per block, which each launch of the
// traced kernel overwrites.
type timeline struct {
	bufs  []cuda.DevicePtr
	bytes []int64
}

func (e *Executor) setupTrace() error {
	if e.opt.Trace <= 0 {
		return nil
	}
	if e.opt.Trace > maxTrace {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: Trace %d records per block is above %d", e.opt.Trace, maxTrace)
	}
	tl := &timeline{}
	e.tl = tl
	for _, rs := range e.ranks {
		n := int64(kernels.TraceBlockBytes(e.opt.Trace)) * int64(rs.nblocks)
		p, err := cuda.Malloc(n)
		if err != nil {
			return err
		}
		tl.bufs, tl.bytes = append(tl.bufs, p), append(tl.bytes, n)
		if err := cuda.Memset8(p, 0, n); err != nil {
			return err
		}
	}
	return nil
}

func (t *timeline) free() error {
	if t == nil {
		return nil
	}
	var first firstErr
	for _, p := range t.bufs {
		first.keep(cuda.Free(p))
	}
	t.bufs = nil
	return first.err
}

// TraceOp is one op a traced kernel ran.
type TraceOp struct {
	Rank, Block int    // block: the thread block's id
	Op          string // the op's name in the ir op table
	Path        string // the op in the plan: gpus[r].threadblocks[b].ops[i] (.ops[j] in a pipeline)
	Window      int    // pipeline window; -1 outside a pipeline
	Start, End  uint64 // %globaltimer ns; End after the block's closing barrier
}

// Timeline is what the traced kernel recorded in the last launch of every
// rank (Options.Trace).
type Timeline struct {
	Ops     []TraceOp // by rank, block, then time
	Launch  []uint64  // per rank: the epoch of the launch recorded
	Dropped int       // records beyond Options.Trace, lost
}

// opName names entry i of a block's op table as tables.go lays it out:
// each op in order, a pipeline followed by its body.
type opName struct {
	name, path string
	inner      bool
}

func (e *Executor) tableOps(rank int) (map[int][]opName, error) {
	tbs, err := blockOrder(&e.p.GPUs[rank], rank)
	if err != nil {
		return nil, err
	}
	out := map[int][]opName{}
	for _, tb := range tbs {
		var ops []opName
		for k := range tb.Ops {
			op := &tb.Ops[k]
			ops = append(ops, opName{op.Code.String(), where(rank, tb.ID, []int{k}), false})
			if op.Code == ir.OpPipeline {
				for j := range op.Ops() {
					ops = append(ops, opName{op.Ops()[j].Code.String(), where(rank, tb.ID, []int{k, j}), true})
				}
			}
		}
		out[tb.ID] = ops
	}
	return out, nil
}

// Timeline reads the records of the last launch on every rank; call it
// after Wait. It needs Options.Trace.
func (e *Executor) Timeline() (*Timeline, error) {
	if e.tl == nil {
		return nil, errors.New("cudaexec: Timeline needs Options.Trace")
	}
	if err := e.syncRanks(); err != nil {
		return nil, err
	}
	t := &Timeline{Launch: make([]uint64, len(e.ranks))}
	per := kernels.TraceBlockBytes(e.opt.Trace)
	for r, rs := range e.ranks {
		names, err := e.tableOps(r)
		if err != nil {
			return nil, err
		}
		raw := make([]byte, e.tl.bytes[r])
		if err := cuda.MemcpyDtoH(raw, e.tl.bufs[r]); err != nil {
			return nil, err
		}
		for b := 0; b < rs.nblocks; b++ {
			launch, recs, dropped := kernels.DecodeTrace(raw[b*per:], e.opt.Trace)
			t.Launch[r] = max(t.Launch[r], launch)
			t.Dropped += dropped
			for _, rec := range recs {
				op := TraceOp{Rank: r, Block: b, Op: fmt.Sprintf("op%d", rec.Op), Window: -1, Start: rec.Start, End: rec.End}
				if int(rec.Op) < len(names[b]) {
					n := names[b][rec.Op]
					op.Op, op.Path = n.name, n.path
					if n.inner {
						op.Window = int(rec.Iter)
					}
				}
				t.Ops = append(t.Ops, op)
			}
		}
	}
	sort.SliceStable(t.Ops, func(i, j int) bool {
		a, b := &t.Ops[i], &t.Ops[j]
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.Block != b.Block {
			return a.Block < b.Block
		}
		return a.Start < b.Start
	})
	return t, nil
}

// ChromeJSON renders the timeline as a Chrome/Perfetto trace with the
// CPU executor's naming (internal/chrometrace): process "rank r", thread
// "block b", one slice per op named after it, args.op its path and
// args.window its pipeline window. Times start at the earliest op.
func (t *Timeline) ChromeJSON() ([]byte, error) {
	var t0 uint64
	for i, op := range t.Ops {
		if i == 0 || op.Start < t0 {
			t0 = op.Start
		}
	}
	var ev []chrometrace.Event
	seen := map[[2]int]bool{}
	for _, op := range t.Ops {
		if !seen[[2]int{op.Rank, -1}] {
			seen[[2]int{op.Rank, -1}] = true
			ev = append(ev, chrometrace.Rank(op.Rank))
		}
		if !seen[[2]int{op.Rank, op.Block}] {
			seen[[2]int{op.Rank, op.Block}] = true
			ev = append(ev, chrometrace.Block(op.Rank, op.Block))
		}
		args := map[string]any{"op": op.Path}
		if op.Window >= 0 {
			args["window"] = op.Window
		}
		dur := 0.001
		if op.End > op.Start {
			dur = max(float64(op.End-op.Start)/1e3, dur)
		}
		ev = append(ev, chrometrace.Event{Name: op.Op, Ph: "X", Ts: float64(op.Start-t0) / 1e3, Dur: dur, Pid: op.Rank, Tid: op.Block, Args: args})
	}
	return chrometrace.Marshal(ev)
}
