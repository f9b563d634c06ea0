package ir

import "fmt"

// Validate checks every structural rule of a decoded plan and returns all
// problems found, each with its JSON path. A plan with no errors can be
// handed to any executor.
func Validate(p *Plan) Diagnostics {
	var s diagSink
	for r := range p.GPUs {
		if p.GPUs[r].ID != r {
			s.errorf(fmt.Sprintf("gpus[%d].id", r), "gpu at position %d has id %d; gpus must be listed in rank order", r, p.GPUs[r].ID)
		}
	}
	return s.ds
}

// Load decodes and validates a plan. The error, when not nil, is a
// *DiagError listing every problem; warnings come back in the diagnostics
// either way.
func Load(data []byte) (*Plan, Diagnostics, error) {
	p, ds := Decode(data)
	if ds.HasErrors() {
		return nil, ds, ds.Err()
	}
	ds = append(ds, Validate(p)...)
	if ds.HasErrors() {
		return nil, ds, ds.Err()
	}
	return p, ds, nil
}
