package main

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
)

// traffic is what one collective of a plan loads from and stores to
// device memory when every rank lives on one GPU (the only machine
// msccl-bench has run on): then every load and store of every op of
// every rank, local or "remote", is an access to the same HBM, so the
// plan's ops alone say how many bytes a collective moves. It counts what
// the kernel's op handlers (kernels/executor.cu) touch: an LL packet
// at its packet size (twice its payload), a fan-out's source once, a
// port packet forward's sources twice (waited for, then copied). Not
// counted: flag polling beyond one read per packet, signals, and the
// op tables; what L2 serves is counted as HBM traffic, so a rate from
// these bytes can exceed what HBM delivered, never fall short of it.
type traffic struct {
	Loads, Stores int64
}

func (t traffic) total() int64 { return t.Loads + t.Stores }

// planTraffic counts the bytes one collective of p loads and stores at
// message size msg (msccl-bench's size: ir.Plan.BufferBytes) with LL
// packets of llWidth bytes. References resolve as the executors resolve
// them (ir.Layout.RefRange on the op's rank, ir.Plan.RemoteOwner for a
// remote buffer's type, ir.WindowBytes per pipeline window).
func planTraffic(p *ir.Plan, msg int64, llWidth int) (traffic, error) {
	var t traffic
	if llWidth != 8 && llWidth != 16 {
		return t, fmt.Errorf("LL packet width %d: want 8 or 16", llWidth)
	}
	in, out, err := p.BufferBytes(msg)
	if err != nil {
		return t, err
	}
	for r := range p.GPUs {
		lay, err := p.Layout(r, in, out)
		if err != nil {
			return t, err
		}
		c := counter{p: p, rank: r, lay: lay, payload: int64(llWidth / 2)}
		for b := range p.GPUs[r].ThreadBlocks {
			tb := &p.GPUs[r].ThreadBlocks[b]
			for i := range tb.Ops {
				at := fmt.Sprintf("gpus[%d].threadblocks[%d].ops[%d]", r, b, i)
				if err := c.op(tb, &tb.Ops[i], &t, at); err != nil {
					return t, err
				}
			}
		}
	}
	return t, nil
}

// counter counts one rank's ops.
type counter struct {
	p       *ir.Plan
	rank    int
	lay     *ir.Layout
	payload int64 // an LL packet's payload bytes: ops move whole packets
}

// noWindow is the window of an op outside a pipeline: all of it (the
// executors' convention).
const noWindow = int64(1) << 62

func (c *counter) op(tb *ir.ThreadBlock, op *ir.Op, t *traffic, at string) error {
	if op.Code >= ir.NumOps {
		return fmt.Errorf("%s: invalid op code %d", at, op.Code)
	}
	if op.Code != ir.OpPipeline {
		return c.window(tb, op, 0, noWindow, t, at)
	}
	it := op.Iter()
	if it == nil || it.UnitSize <= 0 {
		return fmt.Errorf("%s: pipeline without a positive unit_size", at)
	}
	unit := int64(it.UnitSize)
	iters := c.lay.PipelineIters(it)
	body := op.Ops()
	for k := int64(0); k < iters; k++ {
		for j := range body {
			if body[j].Code == ir.OpPipeline {
				return fmt.Errorf("%s.ops[%d]: nested pipeline", at, j)
			}
			if err := c.window(tb, &body[j], k*unit, unit, t, fmt.Sprintf("%s.ops[%d]", at, j)); err != nil {
				return err
			}
		}
	}
	return nil
}

// window adds what one op moves in the window of unit bytes starting w
// bytes into its references.
func (c *counter) window(tb *ir.ThreadBlock, op *ir.Op, w, unit int64, t *traffic, at string) error {
	info := op.Info()
	switch info.Class {
	case ir.ClassSync:
		return nil
	case ir.ClassSwitch:
		return fmt.Errorf("%s: %s is NVLink multicast, which the GPU executor refuses; its traffic is not counted", at, info.Name)
	}
	src, err := c.sizes(tb, op, op.Src, at+".src_buff")
	if err != nil {
		return err
	}
	dst, err := c.sizes(tb, op, op.Dst, at+".dst_buff")
	if err != nil {
		return err
	}
	n := ir.WindowBytes(src, dst, func(x *int64) int64 { return *x }, w, unit)
	if n <= 0 {
		return nil
	}
	// pk is a reference's bytes in memory: a packet doubles its payload.
	pk := func(packet bool) int64 {
		if packet {
			return 2
		}
		return 1
	}
	port := op.ChannelType == ir.ChanPort
	switch op.Code {
	case ir.OpPut, ir.OpPws, ir.OpPwsf, ir.OpGet, ir.OpCopy:
		// Each pair is clipped on its own (an op's references agree in
		// every well-formed plan, but the kernel takes the pair's minimum).
		for k := range dst {
			s := src[ir.PairedSrc(k, len(src))]
			_, sn := ir.Window(0, s, w, unit)
			_, dn := ir.Window(0, dst[k], w, unit)
			m := min(sn, dn)
			t.Loads += m
			t.Stores += m
		}
		return nil
	case ir.OpRe, ir.OpRes, ir.OpRre, ir.OpRres:
		t.Loads += int64(len(src)) * n
		t.Stores += int64(len(dst)) * n
		return nil
	}
	// The LL packet family moves whole packets only.
	n -= n % c.payload
	switch {
	case op.Code == ir.OpRppkt && port:
		// Every source packet is waited for (read), then copied whole.
		t.Loads += int64(len(src)+len(dst)) * 2 * n
		t.Stores += int64(len(dst)) * 2 * n
	case op.Code == ir.OpRppkt && len(src) == 1 && len(dst) > 1:
		// Fan-out: each packet of the one source is read once.
		t.Loads += pk(op.IsPacketSrc(0)) * n
		for k := range dst {
			t.Stores += pk(op.IsPacketDst(k)) * n
		}
	case op.Code == ir.OpPpkt || op.Code == ir.OpRppkt || op.Code == ir.OpCpkt || op.Code == ir.OpUpkt:
		// dst[k] from src[k] (a port ppkt's source already holds packets:
		// IsPacketSrc).
		for k := 0; k < len(dst) && k < len(src); k++ {
			t.Loads += pk(op.IsPacketSrc(k)) * n
			t.Stores += pk(op.IsPacketDst(k)) * n
		}
	default:
		// Packet reductions: every source once, every destination once.
		for k := range src {
			t.Loads += pk(op.IsPacketSrc(k)) * n
		}
		for k := range dst {
			t.Stores += pk(op.IsPacketDst(k)) * n
		}
	}
	return nil
}

// sizes resolves an op's references to their payload bytes.
func (c *counter) sizes(tb *ir.ThreadBlock, op *ir.Op, refs []ir.BufRef, at string) ([]int64, error) {
	out := make([]int64, len(refs))
	for k := range refs {
		br := &refs[k]
		typ := br.Type
		if br.Kind == ir.RefRemote {
			var err error
			if _, typ, err = c.p.RemoteOwner(c.rank, tb.RemoteTable(op.ChannelType), op.ChannelType, br.BufferID); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", at, k, err)
			}
		}
		_, n := c.lay.RefRange(typ, br, op)
		if n < 0 {
			return nil, fmt.Errorf("%s[%d]: chunks [%d, %d) map to no byte range", at, k, br.Index, br.Index+br.Size)
		}
		out[k] = n
	}
	return out, nil
}
