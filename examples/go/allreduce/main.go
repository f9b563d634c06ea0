// Command allreduce shows the msccl Go API end to end: compile a library
// algorithm (or load a plan file), open its ranks on the GPU, fill every
// rank's input, run one allreduce and check the result on the host.
//
//	go run ./examples/go/allreduce -ranks 4 -size 1048576
//	go run ./examples/go/allreduce -plan testdata/peer-plans/allreduce.json
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, msccl.ErrNoGPU) {
			fmt.Fprintln(os.Stderr, "allreduce: no GPU here:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		os.Exit(1)
	}
}

func run() error {
	planFile := flag.String("plan", "", "plan JSON (default: compile the library's allreduce_allpairs_packet)")
	ranks := flag.Int("ranks", 4, "ranks, when compiling the library algorithm")
	size := flag.Int64("size", 1<<20, "message bytes")
	flag.Parse()

	var p *msccl.Plan
	var err error
	if *planFile != "" {
		p, err = msccl.LoadPlan(*planFile)
	} else {
		p, err = msccl.CompileAlgorithm("", "allreduce_allpairs_packet", map[string]int64{"ranks": int64(*ranks)})
	}
	if err != nil {
		return err
	}
	c, err := msccl.Open(p, msccl.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := c.Alloc(*size)
	if err != nil {
		return err
	}
	defer b.Free()

	// Rank r contributes r+1 in every f32 element: the sum is n(n+1)/2.
	n := c.Ranks()
	in := make([]byte, b.InBytes)
	for r := 0; r < n; r++ {
		for i := 0; i+4 <= len(in); i += 4 {
			binary.LittleEndian.PutUint32(in[i:], math.Float32bits(float32(r+1)))
		}
		if err := cuda.MemcpyHtoD(b.In[r], in); err != nil {
			return err
		}
	}
	if err := c.Run(b, msccl.F32, msccl.Sum, nil); err != nil {
		return err
	}
	if err := c.Wait(nil); err != nil {
		return err
	}
	want := float32(n * (n + 1) / 2)
	out := make([]byte, b.OutBytes)
	for r := 0; r < n; r++ {
		if err := cuda.MemcpyDtoH(out, b.Out[r]); err != nil {
			return err
		}
		for i := 0; i+4 <= len(out); i += 4 {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(out[i:])); got != want {
				return fmt.Errorf("rank %d element %d: got %v, want %v", r, i/4, got, want)
			}
		}
	}
	fmt.Printf("%s: %d ranks, %d bytes: every element is %v on every rank\n", p.Name, n, *size, want)
	return nil
}
