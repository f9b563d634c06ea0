package ir

import "testing"

// Each rank's region holds what the executors address: in-place gathers
// read their input at slice r of the output and only that slice,
// scatters write their output at slice r of the input, other in-place
// collectives share one buffer, and scratch starts past them, aligned.
func TestRegion(t *testing.T) {
	for _, c := range []struct {
		name      string
		col       Collective
		inPlace   bool
		r         int
		in, out   int64
		sc, align int64
		want      Region
	}{
		{"in-place allgather rank 3", AllGather, true, 3, 100, 400, 64, 256,
			Region{InOff: 300, InBytes: 100, OutBytes: 400, ScratchOff: 512, Total: 576}},
		{"in-place gather rank 1, 64-byte starts", Gather, true, 1, 100, 400, 8, 64,
			Region{InOff: 100, InBytes: 100, OutBytes: 400, ScratchOff: 448, Total: 456}},
		{"in-place reducescatter rank 1", ReduceScatter, true, 1, 400, 100, 64, 256,
			Region{OutOff: 100, InBytes: 400, OutBytes: 100, ScratchOff: 512, Total: 576}},
		{"in-place scatter rank 3", Scatter, true, 3, 400, 100, 0, 64,
			Region{OutOff: 300, InBytes: 400, OutBytes: 100, ScratchOff: 448, Total: 448}},
		{"out-of-place allreduce", AllReduce, false, 0, 300, 300, 32, 256,
			Region{OutOff: 512, InBytes: 300, OutBytes: 300, ScratchOff: 1024, Total: 1056}},
		{"in-place allreduce", AllReduce, true, 2, 300, 300, 32, 256,
			Region{InBytes: 300, OutBytes: 300, ScratchOff: 512, Total: 544}},
	} {
		p := &Plan{Collective: c.col, InPlace: c.inPlace}
		if got := p.Region(c.r, c.in, c.out, c.sc, c.align); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}
