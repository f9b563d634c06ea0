package ir

import "testing"

// TestOpTableConsistent checks the invariants every row of the op table
// must keep; the codec, validator and executors rely on them.
func TestOpTableConsistent(t *testing.T) {
	seen := map[string]bool{}
	for i, in := range Ops() {
		if in.Code != OpCode(i) || in.Name == "" {
			t.Errorf("row %d: code %d name %q", i, in.Code, in.Name)
		}
		if seen[in.Name] {
			t.Errorf("%s: duplicate name", in.Name)
		}
		seen[in.Name] = true
		if c, ok := LookupOp(in.Name); !ok || c != in.Code {
			t.Errorf("%s: LookupOp = %d, %v", in.Name, c, ok)
		}
		if in.ChannelIDs&^in.Chans != 0 {
			t.Errorf("%s: channel_ids for a channel type the op cannot use", in.Name)
		}
		for _, o := range []struct {
			key string
			op  Operand
		}{{"src", in.Src}, {"dst", in.Dst}} {
			if o.op.Min > o.op.Max || o.op.Max > MaxRefsPerOp {
				t.Errorf("%s %s: min %d max %d", in.Name, o.key, o.op.Min, o.op.Max)
			}
			if o.op.Max > 0 && o.op.First == 0 {
				t.Errorf("%s %s: element 0 allows no reference kind", in.Name, o.key)
			}
			if o.op.Max > 1 && o.op.Rest == 0 {
				t.Errorf("%s %s: elements 1.. allow no reference kind", in.Name, o.key)
			}
			usesRemote := o.op.First.Has(RefRemote) || o.op.Rest.Has(RefRemote) || o.op.Second.Has(RefRemote)
			if usesRemote && !in.Chans.Has(ChanMemory) && !in.Chans.Has(ChanPort) {
				t.Errorf("%s %s: remote refs without a memory or port channel type to resolve them", in.Name, o.key)
			}
			usesSwitch := o.op.First.Has(RefSwitch) || o.op.Rest.Has(RefSwitch)
			if usesSwitch && !in.Chans.Has(ChanSwitch) {
				t.Errorf("%s %s: switch refs on an op that takes no switch channel", in.Name, o.key)
			}
		}
		packetOperand := in.Src.PacketFirst || in.Src.PacketRest || in.Dst.PacketFirst || in.Dst.PacketRest
		if in.Class == ClassPacket && !packetOperand {
			t.Errorf("%s: packet op with no packet operand", in.Name)
		}
		if in.Paired && (in.Src.Max != in.Dst.Max || in.Src.Min != in.Dst.Min) {
			t.Errorf("%s: paired op with src and dst bounds that differ", in.Name)
		}
		// What the executors ask instead of switching on codes: a signal
		// needs a channel to signal, a node-crossing op and a port packet
		// source need a port channel.
		if in.Signals && in.ChannelIDs == MaskNone {
			t.Errorf("%s: signals but names no channels", in.Name)
		}
		if (in.CrossNode || in.PortSrcPacket) && !in.ChannelIDs.Has(ChanPort) {
			t.Errorf("%s: crosses nodes or reads port packets without port channel_ids", in.Name)
		}
	}
	// The semantics the executors and the CUDA tables rely on, pinned.
	for _, c := range []struct {
		op                             OpCode
		signals, crossNode, portSrcPkt bool
	}{
		{OpSignal, true, false, false}, {OpRlxSignal, true, false, false}, {OpWait, false, false, false},
		{OpPut, false, true, false}, {OpPws, true, true, false}, {OpPwsf, true, true, false}, {OpGet, false, false, false},
		{OpPpkt, false, true, true}, {OpRppkt, false, true, false}, {OpCpkt, false, false, false}, {OpGstorepkt, false, false, false},
	} {
		in := c.op.Info()
		if in.Signals != c.signals || in.CrossNode != c.crossNode || in.PortSrcPacket != c.portSrcPkt {
			t.Errorf("%s: signals %v crosses nodes %v port packet source %v; want %v %v %v", in.Name, in.Signals, in.CrossNode, in.PortSrcPacket, c.signals, c.crossNode, c.portSrcPkt)
		}
	}
	for _, c := range []struct {
		op       OpCode
		ct       ChannelType
		k        int
		src, dst bool
	}{
		{OpPpkt, ChanMemory, 0, false, true}, {OpPpkt, ChanPort, 0, true, true},
		{OpRppkt, ChanPort, 0, true, true}, {OpPut, ChanPort, 0, false, false},
		{OpCpkt, ChanNone, 0, false, true}, {OpUpkt, ChanNone, 0, true, false},
		{OpRepkt, ChanNone, 0, false, false}, {OpRepkt, ChanNone, 1, true, false},
		{OpGstorepkt, ChanSwitch, 0, true, true}, {OpGstore, ChanSwitch, 0, false, false},
	} {
		op := Op{Code: c.op, ChannelType: c.ct}
		if op.IsPacketSrc(c.k) != c.src || op.IsPacketDst(c.k) != c.dst {
			t.Errorf("%s over %s operand %d: packet src %v dst %v; want %v %v", c.op, c.ct, c.k, op.IsPacketSrc(c.k), op.IsPacketDst(c.k), c.src, c.dst)
		}
	}
	if len(seen) != int(NumOps) {
		t.Errorf("%d names for %d ops", len(seen), NumOps)
	}
}
