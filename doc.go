// Package msccl is the small public Go API of msccl-go: load a plan (a
// JSON file, or a library algorithm picked from algorithms/selection.yaml
// by collective, rank count and message size), open every rank on the
// visible GPU, allocate or wrap device buffers, run the collective on a
// stream and close.
//
//	p, _ := msccl.LoadPlan("plan.json")
//	c, _ := msccl.Open(p, msccl.Options{})
//	defer c.Close()
//	b, _ := c.Alloc(1 << 20)
//	_ = c.Run(b, msccl.F16, msccl.Sum, nil)
//	_ = c.Wait(nil)
//
// Everything else (the plan format, the compiler, the executors, the CUDA
// runtime) lives in its own package; this one only wires them together and
// must stay small (see wazero's root package for the model).
package msccl
