package topo

import (
	"fmt"
	"sort"

	"github.com/msccl-go/msccl-go/ir"
)

// PlanTransports chooses the transport between rank self of plan p and
// every peer p connects it to, by a channel or a remote buffer, given
// where every rank runs (places, index = rank, as the communicator
// gathers them). It refuses the plan, naming the ranks, the channel and
// the transport's reason, where self's side cannot be built: a memory
// channel, or a remote buffer accessed through one, to a peer whose
// transport carries no memory channels (another node, GPUs without peer
// access); a switch channel with a rank not reached through NVSwitch.
// Port channels work over every transport. Every rank checks its own
// side; channel pairing makes that the whole plan.
func (t *Topology) PlanTransports(p *ir.Plan, places []RankPlace, self int) (map[int]Transport, error) {
	if len(places) != len(p.GPUs) {
		return nil, fmt.Errorf("topo: plan %s has %d ranks, but %d places were given", p.Name, len(p.GPUs), len(places))
	}
	if self < 0 || self >= len(p.GPUs) {
		return nil, fmt.Errorf("topo: rank %d is not in plan %s of %d ranks", self, p.Name, len(p.GPUs))
	}
	out := map[int]Transport{}
	// need records, per peer, the first use that needs memory channels.
	need := map[int]string{}
	add := func(peer int, what string, memory bool) error {
		if peer < 0 || peer >= len(places) {
			return fmt.Errorf("topo: plan %s: rank %d's %s names rank %d, outside the plan", p.Name, self, what, peer)
		}
		if _, ok := out[peer]; !ok {
			tr, err := t.Transport(places[self], places[peer])
			if err != nil {
				return fmt.Errorf("plan %s, rank %d's %s: %w", p.Name, self, what, err)
			}
			out[peer] = tr
		}
		if _, ok := need[peer]; memory && !ok {
			need[peer] = what
		}
		return nil
	}
	g := p.GPUs[self]
	for k, ch := range g.Channels {
		for _, peer := range ch.ConnectedTo {
			what := fmt.Sprintf("%s channel %d to rank %d", ch.Type, k, peer)
			if err := add(peer, what, ch.Type == ir.ChanMemory); err != nil {
				return nil, err
			}
		}
		if ch.Type == ir.ChanSwitch {
			if err := t.switchGroups(p, places, self, k, ch, add); err != nil {
				return nil, err
			}
		}
	}
	for k, rb := range g.RemoteBuffers {
		memory := false
		for _, ct := range rb.AccessChannelTypes {
			memory = memory || ct == ir.ChanMemory
		}
		what := fmt.Sprintf("remote buffer %d (rank %d's %s)", k, rb.Rank, rb.Type.Long())
		if err := add(rb.Rank, what, memory); err != nil {
			return nil, err
		}
	}
	peers := make([]int, 0, len(need))
	for peer := range need {
		peers = append(peers, peer)
	}
	sort.Ints(peers)
	for _, peer := range peers {
		if tr := out[peer]; !tr.Kind.MemoryChannels() {
			return nil, fmt.Errorf("topo: plan %s: rank %d's %s needs peer memory access, which rank %d (%s) and rank %d (%s) lack: %s; use a plan with port channels between them",
				p.Name, self, need[peer], self, places[self], peer, places[peer], tr)
		}
	}
	return out, nil
}

// switchGroups checks that every rank of self's groups in switch channel
// k shares an NVSwitch with self (multicast needs the switch fabric).
func (t *Topology) switchGroups(p *ir.Plan, places []RankPlace, self, k int, ch ir.Channel, add func(int, string, bool) error) error {
	for _, grp := range ch.RankGroups {
		in := false
		for _, r := range grp.Ranks {
			in = in || r == self
		}
		if !in {
			continue
		}
		for _, r := range grp.Ranks {
			if r == self {
				continue
			}
			what := fmt.Sprintf("switch channel %d (group with rank %d)", k, r)
			if err := add(r, what, true); err != nil {
				return err
			}
			a, b := places[self], places[r]
			if a.Node == b.Node && a.GPU == NoGPU && b.GPU == NoGPU {
				// The CPU device maps every member of a node's group:
				// its multicast is plain shared memory.
				continue
			}
			if a.Node != b.Node || a.GPU == b.GPU || !t.cell(a.GPU, b.GPU).NVSwitch {
				return fmt.Errorf("topo: plan %s: rank %d's %s needs NVLink multicast, but rank %d (%s) and rank %d (%s) do not share an NVSwitch",
					p.Name, self, what, self, a, r, b)
			}
		}
	}
	return nil
}
