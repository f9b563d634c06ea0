// Command ranks shows the one-process-per-rank Go API on the cpu or the
// cuda device: each process joins the job its launcher describes
// (msccl.OpenComm, one call), compiles and opens the same plan, fills its
// input with its rank number plus one, runs one allreduce and checks that
// every element is 1+2+...+n.
//
//	go run ./examples/go/ranks -procs 4             # starts 4 processes of itself
//	go run ./examples/go/ranks -procs 4 -device cuda  # one GPU each, or round-robin
//	mpirun -np 4 ./ranks                            # or under a launcher:
//	torchrun --no-python --nproc-per-node 4 ./ranks
//	srun -n 4 ./ranks
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"

	msccl "github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

func main() {
	procs := flag.Int("procs", 0, "start this many processes of this program, one rank each")
	algo := flag.String("algo", "allreduce_ring", "library allreduce algorithm")
	size := flag.Int64("size", 1<<20, "message bytes (f32 elements × 4)")
	device := flag.String("device", "cpu", "cpu (shared memory) or cuda (a GPU per rank, peers' memory through CUDA IPC)")
	flag.Parse()
	var err error
	if *procs > 0 {
		err = launch(*procs, *device)
	} else {
		err = rank(*algo, *size, *device)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ranks:", err)
		os.Exit(1)
	}
}

// launch starts n copies of this program with the rendezvous in their
// environment and waits for all of them. On the cuda device, ranks share
// the machine's GPUs round-robin unless MSCCL_CUDA_DEVICE says otherwise
// (one GPU can host them all).
func launch(n int, device string) error {
	args := append([]string{""}, os.Args[1:]...)
	env := func(int) []string {
		if device == "cuda" && os.Getenv("MSCCL_CUDA_DEVICE") == "" {
			return []string{"MSCCL_CUDA_DEVICE=round-robin"}
		}
		return nil
	}
	job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{N: n, Argv: append(args, "-procs=0"), RankEnv: env})
	if err != nil {
		return err
	}
	_, err = job.Wait()
	return err
}

func rank(algo string, size int64, device string) error {
	ctx := context.Background()
	rc, err := msccl.OpenComm(ctx, msccl.CommOptions{Device: device})
	if err != nil {
		return err
	}
	defer rc.Close()
	n := rc.Size()
	p, err := msccl.CompileAlgorithm("", algo, map[string]int64{"ranks": int64(n)})
	if err != nil {
		return err
	}
	ex, err := rc.Open(ctx, p, msccl.Options{})
	if err != nil {
		return err
	}
	defer ex.Close()
	b, err := ex.Alloc(ctx, size)
	if err != nil {
		return err
	}
	defer b.Free()
	// SetInput and OutputOf copy on either device (on the cpu device
	// Input and Output are the shared memory itself).
	in := make([]byte, size)
	for i := 0; i+4 <= len(in); i += 4 {
		binary.LittleEndian.PutUint32(in[i:], math.Float32bits(float32(rc.Rank()+1)))
	}
	if err := b.SetInput(in); err != nil {
		return err
	}
	if err := ex.Run(ctx, b, msccl.F32, msccl.Sum); err != nil {
		return err
	}
	want := float32(n * (n + 1) / 2)
	out, err := b.OutputOf(rc.Rank())
	if err != nil {
		return err
	}
	for i := 0; i+4 <= len(out); i += 4 {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(out[i:])); got != want {
			return fmt.Errorf("rank %d: element %d is %v, want %v", rc.Rank(), i/4, got, want)
		}
	}
	fmt.Printf("rank %d of %d (%s): %s of %s bytes correct\n", rc.Rank(), n, algo, p.Collective, strconv.FormatInt(size, 10))
	return nil
}
