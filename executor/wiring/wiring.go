// Package wiring derives from a plan what the communicator connects for
// it (runtime/comm.Wiring): every rank's memory and port channels by peer
// in the order thread blocks index them (ir.GPU.FlatChannels), the remote
// buffers each rank reaches and over which channel types, and the plan's
// encoding, which the ranks compare before connecting. The runtime reads
// no plans; the executors that run one (executor/host, executor/cuda's
// OpenRank) hand the communicator this plain description instead.
//
// Errors of the communicator name the plan's positions ("gpus[3]",
// "gpus[3].remote_buffers[2]"), which this package writes into the
// description.
package wiring

import (
	"fmt"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
)

// Of describes p's channels and remote buffers for comm.Connect.
func Of(p *ir.Plan) (*comm.Wiring, error) {
	src, err := ir.Encode(p)
	if err != nil {
		return nil, fmt.Errorf("plan %q: %w", p.Name, err)
	}
	w := &comm.Wiring{Name: p.Name, Source: src, Ranks: make([]comm.RankWiring, len(p.GPUs))}
	for r := range p.GPUs {
		g, rw := &p.GPUs[r], &w.Ranks[r]
		rw.Where = fmt.Sprintf("gpus[%d]", r)
		rw.Memory = peers(g.FlatChannels(ir.ChanMemory))
		rw.Port = peers(g.FlatChannels(ir.ChanPort))
		for i, rb := range g.RemoteBuffers {
			reach := comm.Reach{Where: fmt.Sprintf("gpus[%d].remote_buffers[%d]", r, i), Rank: rb.Rank}
			for _, t := range rb.AccessChannelTypes {
				reach.Over = append(reach.Over, kinds[t])
			}
			rw.Reach = append(rw.Reach, reach)
		}
	}
	return w, nil
}

// kinds are the communicator's names for a plan's channel types; any
// other (none, or invalid) maps to comm.KindNone, which Connect refuses
// across nodes like every kind but port.
var kinds = map[ir.ChannelType]comm.Kind{
	ir.ChanMemory: comm.KindMemory,
	ir.ChanPort:   comm.KindPort,
	ir.ChanSwitch: comm.KindSwitch,
}

// peers lists the peer of each channel of flat.
func peers(flat []ir.FlatChannel) []int {
	if len(flat) == 0 {
		return nil
	}
	out := make([]int, len(flat))
	for i, fc := range flat {
		out[i] = fc.Peer
	}
	return out
}
