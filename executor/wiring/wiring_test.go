package wiring_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/wiring"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/comm/commtest"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// plans are the library's algorithms at 4 ranks (the hierarchical ones
// as 2 nodes of 2: port channels) and upstream's plans, some of which
// pad channels the peer lists none back for.
func plans(t *testing.T) []*ir.Plan {
	t.Helper()
	var out []*ir.Plan
	for _, name := range algorithms.Names() {
		src, _ := algorithms.Source(name)
		params := map[string]int64{"ranks": 4}
		if strings.HasSuffix(name, "hierarchical") {
			params = map[string]int64{"nodes": 2, "gpus_per_node": 2}
		}
		p, _, ds := compiler.CompileSource(name, src, params, compiler.Options{})
		if ds.HasErrors() {
			t.Fatalf("%s: %s", name, ds.String())
		}
		out = append(out, p)
	}
	files, err := filepath.Glob("../../testdata/peer-plans/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("upstream plans: %v %v", files, err)
	}
	for _, f := range files {
		p, ds, err := ir.LoadFile(f)
		if err != nil || ds.HasErrors() {
			t.Fatalf("%s: %v %v", f, err, ds)
		}
		out = append(out, p)
	}
	return out
}

// Connecting a plan's wiring gives every channel end the peer and the
// partner that the plan's own rule (ir.Plan.Partner) names, on every
// rank: the description loses nothing the pairing needs.
func TestConnectPairsAsThePlan(t *testing.T) {
	for _, p := range plans(t) {
		w, err := wiring.Of(p)
		if err != nil {
			t.Fatal(err)
		}
		nodes := make([]string, len(p.GPUs))
		for r := range nodes {
			nodes[r] = "a"
		}
		errs := commtest.Join(t, nodes, cpudev.Device{}, 5*time.Second, func(ctx context.Context, c *comm.Comm) error {
			cs, err := c.Connect(ctx, w)
			if err != nil {
				return err
			}
			defer cs.Close()
			r := c.Rank()
			for s, typ := range []ir.ChannelType{ir.ChanMemory, ir.ChanPort} {
				flat, ends := p.GPUs[r].FlatChannels(typ), [2][]comm.Channel{cs.Memory, cs.Port}[s]
				if len(ends) != len(flat) {
					return fmt.Errorf("%d %s channel ends, the plan has %d", len(ends), typ, len(flat))
				}
				for i, e := range ends {
					want := -1
					if _, j, ok := p.Partner(r, typ, i); ok {
						want = j
					}
					if e.Peer != flat[i].Peer || e.Partner != want || e.Type.String() != typ.String() {
						return fmt.Errorf("%s channel %d: %s to rank %d partner %d, the plan says to rank %d partner %d", typ, i, e.Type, e.Peer, e.Partner, flat[i].Peer, want)
					}
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("%s: rank %d: %v", p.Name, r, err)
			}
		}
	}
}

// The positions the communicator's refusals name are the plan's.
func TestOfNamesPositions(t *testing.T) {
	p := &ir.Plan{Name: "x", GPUs: []ir.GPU{{ID: 0}, {ID: 1, RemoteBuffers: []ir.RemoteBuffer{{}, {Rank: 0, AccessChannelTypes: []ir.ChannelType{ir.ChanPort, ir.ChanSwitch}}}}}}
	w, err := wiring.Of(p)
	if err != nil {
		t.Fatal(err)
	}
	rw := w.Ranks[1]
	if rw.Where != "gpus[1]" || len(rw.Reach) != 2 || rw.Reach[1].Where != "gpus[1].remote_buffers[1]" || fmt.Sprint(rw.Reach[1].Over) != "[port switch]" {
		t.Fatalf("rank 1: %+v", rw)
	}
}
