// Command ranks shows the one-process-per-rank Go API on the cpu or the
// cuda device: each process joins the job its launcher describes
// (msccl.OpenComm, one call), fills its input with its rank number plus
// one, runs one allreduce on its own buffer (the communicator picks the
// proven plan, or with -algo compiles that library algorithm) and checks
// that every element is 1+2+...+n. One rank works too, as with NCCL.
//
//	go run ./examples/go/ranks                      # a job of one rank
//	go run ./examples/go/ranks -procs 4             # starts 4 processes of itself
//	go run ./examples/go/ranks -procs 4 -device cuda  # one GPU each, or round-robin
//	mpirun -np 4 ./ranks                            # or under a launcher:
//	export MSCCL_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
//	torchrun --no-python --nproc-per-node 4 ./ranks  # torchrun and srun hand out
//	srun -n 4 ./ranks                               # no secret: MSCCL_SECRET is it
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
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

func main() {
	procs := flag.Int("procs", 0, "start this many processes of this program, one rank each")
	algo := flag.String("algo", "", "library allreduce algorithm (default: the selection table's choice)")
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
	var opts []msccl.CallOption
	name := "selection table"
	if algo != "" && n > 1 {
		p, err := msccl.CompileAlgorithm("", algo, map[string]int64{"ranks": int64(n)})
		if err != nil {
			return err
		}
		opts, name = append(opts, msccl.WithPlan(p)), algo
	}
	buf := make([]byte, size)
	for i := 0; i+4 <= len(buf); i += 4 {
		binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(float32(rc.Rank()+1)))
	}
	// Host memory on the cpu device; on the cuda device the buffer is
	// device memory (msccl.DeviceMem) and the call is queued on a stream.
	mem, finish, err := buffer(rc, buf)
	if err != nil {
		return err
	}
	if err := rc.AllReduce(ctx, mem, mem, msccl.F32, msccl.Sum, opts...); err != nil {
		return err
	}
	if err := finish(buf); err != nil {
		return err
	}
	want := float32(n * (n + 1) / 2)
	for i := 0; i+4 <= len(buf); i += 4 {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(buf[i:])); got != want {
			return fmt.Errorf("rank %d: element %d is %v, want %v", rc.Rank(), i/4, got, want)
		}
	}
	fmt.Printf("rank %d of %d (%s): allreduce of %s bytes correct\n", rc.Rank(), n, name, strconv.FormatInt(size, 10))
	return nil
}

// buffer is buf as the rank's device takes it, and finish copies the
// result back into buf once the call is done: host memory on the cpu
// device; on the cuda device a copy in device memory, the allreduce
// queued on the legacy default stream (0) and waited for in finish.
func buffer(rc *msccl.RankComm, buf []byte) (msccl.Mem, func([]byte) error, error) {
	if rc.Device() != "cuda" {
		return msccl.HostMem(buf), func([]byte) error { return nil }, nil
	}
	d, err := cuda.Malloc(int64(len(buf)))
	if err != nil {
		return msccl.Mem{}, nil, err
	}
	if err := cuda.MemcpyHtoD(d, buf); err != nil {
		cuda.Free(d)
		return msccl.Mem{}, nil, err
	}
	finish := func(out []byte) error {
		defer cuda.Free(d)
		if err := cuda.StreamOf(0).Synchronize(); err != nil {
			return err
		}
		return cuda.MemcpyDtoH(out, d)
	}
	return msccl.DeviceMem(d, int64(len(buf))), finish, nil
}
