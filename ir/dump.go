package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dump renders a plan as deterministic text for people and golden tests:
// a header line, then per gpu its chunk counts, flattened channel lists,
// remote buffers and semaphores, then per block its local tables and one
// line per op. Remote buffer refs are resolved through the block's table
// (rb0(r1 i) is local buffer id 0, rank 1's input); pipeline bodies are
// indented under their pipeline. Dump works on invalid plans too: what it
// cannot resolve prints as "?".
func Dump(p *Plan) string {
	var b strings.Builder
	if p == nil {
		return "no plan\n"
	}
	fmt.Fprintf(&b, "plan %q: %s %s gpus=%d threads=%d align=%d msg=%d..%s", p.Name, p.Collective, p.Protocol,
		len(p.GPUs), p.NumThreadsPerBlock, p.BufferAlignment, p.MinMessageSize, msgMax(p.MaxMessageSize))
	if p.SizeGranularity != 0 {
		fmt.Fprintf(&b, " granularity=%d", p.SizeGranularity)
	}
	if p.UniformScratch {
		b.WriteString(" uniform_scratch")
	}
	if p.Root != 0 {
		fmt.Fprintf(&b, " root=%d", p.Root)
	}
	if p.Peers != nil {
		fmt.Fprintf(&b, " peers=%v", p.Peers)
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{p.InPlace, "inplace"}, {p.ReuseResources, "reuse_resources"}, {p.DoubleScratch, "double_scratch"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	b.WriteByte('\n')
	for r := range p.GPUs {
		dumpGPU(&b, p, r)
	}
	return b.String()
}

func msgMax(n uint64) string {
	if n == math.MaxUint64 {
		return "max"
	}
	return strconv.FormatUint(n, 10)
}

func dumpGPU(b *strings.Builder, p *Plan, r int) {
	g := &p.GPUs[r]
	fmt.Fprintf(b, "gpu %d: id=%d input=%d output=%d scratch=%d\n", r, g.ID, g.InputChunks, g.OutputChunks, g.ScratchChunks)
	for t := ChanMemory; t <= ChanSwitch; t++ {
		flat := g.FlatChannels(t)
		if len(flat) == 0 {
			continue
		}
		fmt.Fprintf(b, "  %s channels:", t)
		for i, fc := range flat {
			if t == ChanSwitch {
				fmt.Fprintf(b, " %d:%s%s", i, fc.BufferType, intList(fc.Group.Ranks, "{", "}"))
			} else {
				fmt.Fprintf(b, " %d:r%d", i, fc.Peer)
			}
		}
		b.WriteByte('\n')
	}
	if len(g.RemoteBuffers) > 0 {
		b.WriteString("  remote buffers:")
		for i, rb := range g.RemoteBuffers {
			ts := make([]string, len(rb.AccessChannelTypes))
			for k, t := range rb.AccessChannelTypes {
				ts[k] = t.String()
			}
			fmt.Fprintf(b, " %d:r%d.%s(%s)", i, rb.Rank, rb.Type, strings.Join(ts, ","))
		}
		b.WriteByte('\n')
	}
	if len(g.Semaphores) > 0 {
		b.WriteString("  semaphores:")
		for i, s := range g.Semaphores {
			fmt.Fprintf(b, " %d=%d", i, s.InitValue)
		}
		b.WriteByte('\n')
	}
	for t := range g.ThreadBlocks {
		tb := &g.ThreadBlocks[t]
		fmt.Fprintf(b, "  tb %d: id=%d", t, tb.ID)
		for ct := ChanMemory; ct <= ChanSwitch; ct++ {
			if tbl := tb.ChannelTable(ct); len(tbl) > 0 {
				fmt.Fprintf(b, " %s=%s", ct, intList(tbl, "[", "]"))
			}
		}
		for ct := ChanMemory; ct <= ChanPort; ct++ {
			if tbl := tb.RemoteTable(ct); len(tbl) > 0 {
				fmt.Fprintf(b, " remote-%s=%s", ct, intList(tbl, "[", "]"))
			}
		}
		b.WriteByte('\n')
		for i := range tb.Ops {
			dumpOp(b, p, g, tb, &tb.Ops[i], i, "    ")
		}
	}
}

func intList(xs []int, open, close string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return open + strings.Join(s, ",") + close
}

func dumpOp(b *strings.Builder, p *Plan, g *GPU, tb *ThreadBlock, op *Op, i int, indent string) {
	in := op.Info()
	fmt.Fprintf(b, "%s%d: %s", indent, i, in.Name)
	if in.Reduces {
		ro := op.ReduceOp()
		if ro == ReduceNone {
			ro = ReduceSum
		}
		fmt.Fprintf(b, " %s", ro)
	}
	if len(op.Src) > 0 {
		fmt.Fprintf(b, " src=%s", dumpRefs(p, g, tb, op, op.Src, op.IsPacketSrc))
	}
	if len(op.Dst) > 0 {
		fmt.Fprintf(b, " dst=%s", dumpRefs(p, g, tb, op, op.Dst, op.IsPacketDst))
	}
	if op.ChannelType != ChanNone {
		fmt.Fprintf(b, " ch=%s", op.ChannelType)
		if len(op.ChannelIDs) > 0 {
			b.WriteString(intList(op.ChannelIDs, "[", "]"))
		}
	} else if len(op.ChannelIDs) > 0 {
		fmt.Fprintf(b, " ch=%s", intList(op.ChannelIDs, "[", "]"))
	}
	if op.TBG() != nil {
		fmt.Fprintf(b, " tbg=%d/%d", op.TBG().TBID, op.TBG().TBGSize)
	}
	if len(op.SemaphoreIDs()) > 0 {
		fmt.Fprintf(b, " sem=%s", intList(op.SemaphoreIDs(), "[", "]"))
	}
	if op.Code == OpBarrier {
		fmt.Fprintf(b, " id=%d blocks=%d", op.BarrierID(), op.NumTBs())
	}
	if op.Code == OpPipeline {
		if op.Iter() != nil {
			fmt.Fprintf(b, " unit=%d chunks=%d", op.Iter().UnitSize, op.Iter().NumChunks)
		}
		b.WriteByte('\n')
		for k := range op.Ops() {
			dumpOp(b, p, g, tb, &op.Ops()[k], k, indent+"  ")
		}
		return
	}
	b.WriteByte('\n')
}

func dumpRefs(p *Plan, g *GPU, tb *ThreadBlock, op *Op, refs []BufRef, packet func(int) bool) string {
	s := make([]string, len(refs))
	for k, r := range refs {
		var name string
		switch r.Kind {
		case RefLocal:
			name = r.Type.String()
		case RefRemote:
			name = fmt.Sprintf("rb%d(%s)", r.BufferID, remoteName(g, tb, op.ChannelType, r.BufferID))
		case RefSwitch:
			bt := "?"
			if tbl := tb.ChannelTable(ChanSwitch); r.SwitchID >= 0 && r.SwitchID < len(tbl) {
				if flat := g.FlatChannels(ChanSwitch); tbl[r.SwitchID] >= 0 && tbl[r.SwitchID] < len(flat) {
					bt = flat[tbl[r.SwitchID]].BufferType.String()
				}
			}
			name = fmt.Sprintf("sw%d(%s)", r.SwitchID, bt)
		default:
			name = "?"
		}
		s[k] = fmt.Sprintf("%s[%d:%d]", name, r.Index, r.Index+r.Size)
		if packet(k) {
			s[k] += "pkt"
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// remoteName resolves a block-local remote buffer id to "r1 i".
func remoteName(g *GPU, tb *ThreadBlock, t ChannelType, id int) string {
	tbl := tb.RemoteTable(t)
	if id < 0 || id >= len(tbl) || tbl[id] < 0 || tbl[id] >= len(g.RemoteBuffers) {
		return "?"
	}
	rb := g.RemoteBuffers[tbl[id]]
	return fmt.Sprintf("r%d %s", rb.Rank, rb.Type)
}
