package cudaexec

import (
	"fmt"

	"github.com/msccl-go/msccl-go/runtime/cuda"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

// checkReduce refuses a reduction the kernel cannot apply to dt.
func checkReduce(p *ir.Plan, red ir.ReduceOp, dt ir.DType) (ir.ReduceOp, error) {
	// A plan whose reduce_op fixes one reduction serves that one only
	// (ir.Plan.RunReduce); none asked means the plan's own.
	red, err := p.RunReduce(red)
	if err != nil {
		return red, fmt.Errorf("cudaexec: %w", err)
	}
	switch red {
	case ir.ReduceSum, ir.ReduceMin, ir.ReduceMax:
	case ir.ReduceProd:
		switch dt {
		case ir.F32, ir.F16, ir.BF16, ir.F8E4M3, ir.F8E5M2:
			return red, diag.Errorc(diag.CodeBadOptions, "cudaexec: prod is supported for integer types only, not %s", dt)
		}
	default:
		return red, diag.Errorc(diag.CodeBadOptions, "cudaexec: unknown reduction %q", red)
	}
	return red, nil
}

// packTables lays out one rank's op tables for one device allocation:
// the encoded tables, their byte offsets (one u32 per block, at offsAt),
// then room for the launch arguments at argsAt (16-byte aligned), which
// the caller fills in. smem is the largest table: the dynamic shared
// memory a block needs.
func packTables(tables []kernels.Table, rank int) (blob []byte, offsAt, argsAt int64, smem uint32, err error) {
	offs := make([]byte, 4*len(tables))
	for i := range tables {
		enc, err := tables[i].Encode()
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("gpus[%d].threadblocks[%d]: %w", rank, i, err)
		}
		putU32(offs[4*i:], uint32(len(blob)))
		blob = append(blob, enc...)
		smem = max(smem, uint32(len(enc)))
	}
	offsAt = int64(len(blob))
	blob = append(blob, offs...)
	for len(blob)%16 != 0 {
		blob = append(blob, 0)
	}
	argsAt = int64(len(blob))
	blob = append(blob, make([]byte, kernels.ArgsBytes)...)
	return blob, offsAt, argsAt, smem, nil
}

// carveStatic allocates a rank's device-side state in one zeroed
// allocation and carves it up: the inbound words of the channel types
// marked in inbound (one u64 per channel; the others live elsewhere),
// then per channel an expected counter, the channel ends, semaphores,
// barriers, and the epoch, done and FIFO-head counters.
func carveStatic(rs *rankRes, g *ir.GPU, inbound [2]bool) error {
	nc := rs.nchan[0] + rs.nchan[1]
	size := int64(16*nc) + int64(kernels.ChanBytes*nc) + int64(4*len(g.Semaphores)) +
		int64(kernels.BarrierBytes*(maxBarriers+1)) + 64 + 4096
	var err error
	if rs.static, err = cuda.Malloc(size); err != nil {
		return err
	}
	if err := cuda.Memset8(rs.static, 0, size); err != nil {
		return err
	}
	p := rs.static
	take := func(n int64) cuda.DevicePtr {
		q := p
		p += cuda.DevicePtr((n + 15) &^ 15)
		return q
	}
	for s, in := range inbound {
		if in {
			rs.inbound[s] = take(8 * int64(rs.nchan[s]))
		}
	}
	rs.expected = [2]cuda.DevicePtr{take(8 * int64(rs.nchan[0])), take(8 * int64(rs.nchan[1]))}
	rs.memChans = take(int64(kernels.ChanBytes * rs.nchan[0]))
	rs.portChan = take(int64(kernels.ChanBytes * rs.nchan[1]))
	rs.sems = take(int64(4 * len(g.Semaphores)))
	rs.barriers = take(int64(kernels.BarrierBytes * maxBarriers))
	rs.epoch = take(8)
	rs.doneCnt = take(8)
	rs.fifoHead = take(8)
	rs.grid = take(int64(kernels.BarrierBytes))
	return nil
}

// deviceArch is the device's NVRTC target (sm_90 on an H200) and its
// multiprocessor count (for the co-residency check).
func deviceArch(d cuda.Device) (arch string, sms int, err error) {
	maj, min, err := d.ComputeCapability()
	if err != nil {
		return "", 0, err
	}
	if sms, err = d.Attribute(cuda.AttrMultiprocessorCount); err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("sm_%d%d", maj, min), sms, nil
}
