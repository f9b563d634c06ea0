package ir

// Region is where one rank's input, output and scratch lie when an
// executor puts all three in one allocation that its peers map (the
// multi-process executors: executor/host on the cpu device, the CUDA
// RankExecutor). Both lay it out here, so that what a peer may address
// cannot differ between them.
type Region struct {
	InOff, OutOff, ScratchOff int64
	// InBytes and OutBytes are the bytes addressable from the input and
	// output starts: the input and output of the collective's definition
	// (BufferBytes), or the whole shared buffer of an in-place collective
	// whose input and output are the same size.
	InBytes, OutBytes int64
	Total             int64 // bytes of the allocation
}

// Region lays out rank r's buffers of in and out bytes (BufferBytes) and
// scratch bytes, each part starting at a multiple of align (a power of
// two). Not in place, the input comes first and the output after it.
// In place, the buffers alias as the CPU executor's do: a gather's input
// is slice r of its output and a scatter's output slice r of its input,
// and each is only that slice long (in the collective's definition rank
// r's input is its own contribution, in bytes; the CPU executor refuses
// a reference past it, so an executor that let a plan read on into the
// other ranks' slices would run plans the proof rejects); other
// collectives share the one buffer from its start.
func (p *Plan) Region(r int, in, out, scratch, align int64) Region {
	up := func(n int64) int64 { return (n + align - 1) &^ (align - 1) }
	g := Region{InBytes: in, OutBytes: out}
	var main int64
	switch {
	case !p.InPlace:
		g.OutOff = up(in)
		main = g.OutOff + out
	case p.Collective.Gathers():
		main = out
		g.InOff = int64(r) * in
	case p.Collective.Scatters():
		main = in
		g.OutOff = int64(r) * out
	default:
		main = max(in, out)
		g.InBytes, g.OutBytes = main, main
	}
	g.ScratchOff = up(main)
	g.Total = g.ScratchOff + scratch
	return g
}
