package cpu

// streamer hands each finished launch to Options.OnLaunch and recycles its
// buffers, so a run of many launches at 64 MiB per rank needs the memory of
// about two launches, not of all of them (the GPU test's oracle runs 10).
type streamer struct {
	on   func(launch int, inputs, outputs [][]byte) error
	done []int    // ranks that have finished each launch
	free [][]byte // recycled input and output buffers
	err  error    // the first error OnLaunch returned; stops the run
	pool *Buffers // Options.Buffers
}

// buf returns a slice of n bytes for the caller to fill, reusing a
// recycled buffer when streaming.
func (st *streamer) buf(n int64) []byte {
	if st.on != nil {
		for i := len(st.free) - 1; i >= 0; i-- {
			if b := st.free[i]; int64(cap(b)) >= n {
				st.free = append(st.free[:i], st.free[i+1:]...)
				return b[:n]
			}
		}
	}
	return st.pool.get(n, false) // filled whole by the caller
}

// launchDone counts rank completions of launch l; when the last rank is
// done and the run streams, the launch is checked, handed over, dropped.
func (s *sim) launchDone(l int) {
	st := &s.stream
	if st.on == nil {
		return
	}
	if st.done[l]++; st.done[l] < len(s.ranks) {
		return
	}
	s.checkLaunch(l)
	if st.err == nil {
		st.err = st.on(l, s.report.Inputs[l], s.report.Outputs[l])
	}
	for _, bs := range [][][]byte{s.report.Inputs[l], s.report.Outputs[l]} {
		for _, b := range bs {
			if b != nil {
				st.free = append(st.free, b)
			}
		}
	}
	s.report.Inputs[l], s.report.Outputs[l] = nil, nil
}

// keepsInputs says whether launch l's inputs are copied for the report
// (and OnLaunch): always but in a byte-level stream past
// Options.OnLaunchInputs, whose check reads them from their recipe.
func (s *sim) keepsInputs(l int) bool {
	k := s.opt.OnLaunchInputs
	return s.stream.on == nil || k <= 0 || l < k || s.opt.DType == symType
}

// inputsOf returns launch l's inputs, rebuilding the ones not kept: for
// the full check and the clobber report, which run only when something
// is wrong.
func (s *sim) inputsOf(l int) [][]byte {
	ins := s.report.Inputs[l]
	for r, in := range ins {
		if in == nil {
			ins[r] = makeInput(s.opt.DType, s.opt.Seed, l, r, s.in)
		}
	}
	return ins
}
