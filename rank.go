package msccl

import (
	"context"
	"fmt"
	"os"
	"time"

	cudaexec "github.com/msccl-go/msccl-go/executor/cuda"
	"github.com/msccl-go/msccl-go/executor/host"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/cudadev"
)

// RankComm is this process's rank in a job of one process per rank,
// started by msccl-bench --procs, torchrun, mpirun or srun.
type RankComm struct {
	c    *comm.Comm
	gpu  *cudadev.Device // the cuda device; nil on the cpu device
	coll *collState      // the collectives on caller buffers (collective.go)
}

// CommOptions configure OpenComm.
type CommOptions struct {
	// Device is where the rank's buffers live: "cpu" (shared memory
	// between the node's processes; plans run on CPU threads) or "cuda"
	// (this process's GPU; peers' memory mapped through CUDA IPC).
	Device string
	// CUDADevice picks the GPU of a cuda rank: an ordinal, "round-robin"
	// (local rank mod the GPUs: several ranks per GPU), or "" for
	// MSCCL_CUDA_DEVICE, else the local rank's own GPU.
	CUDADevice string
	// CUDAIPC is how a cuda rank shares memory: "vmm" (POSIX file
	// descriptors of cuMemCreate allocations), "legacy" (cuIpcGetMemHandle)
	// or "" for MSCCL_CUDA_IPC, else vmm where the driver supports it.
	CUDAIPC string
	// Timeout bounds every step of the rendezvous and the exchange of
	// memory; 0 takes MSCCL_BOOTSTRAP_TIMEOUT, or 30 s.
	Timeout time.Duration
}

// OpenComm joins the job the environment describes (MSCCL_*, torchrun,
// Open MPI or Slurm variables; none: a job of one process) and connects
// this rank with the others on its node. Every rank calls it.
func OpenComm(ctx context.Context, opt CommOptions) (*RankComm, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	cfg, err := bootstrap.FromEnv()
	if err != nil {
		return nil, err
	}
	return openComm(ctx, cfg, opt)
}

func (opt CommOptions) check() error {
	switch opt.Device {
	case "cpu":
	case "cuda":
		// Before the rendezvous, so that a machine without a driver
		// fails at once rather than after the other ranks arrive.
		if err := cuda.Init(); err != nil {
			return fmt.Errorf("msccl: device \"cuda\": %w", err)
		}
	default:
		return fmt.Errorf("msccl: device %q: OpenComm supports \"cpu\" and \"cuda\"", opt.Device)
	}
	return nil
}

func openComm(ctx context.Context, cfg bootstrap.Config, opt CommOptions) (*RankComm, error) {
	if opt.Timeout > 0 {
		cfg.Timeout = opt.Timeout
	}
	bs, err := bootstrap.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var dev comm.Device = cpudev.Device{}
	var gpu *cudadev.Device
	if opt.Device == "cuda" {
		if gpu, err = openGPU(bs, opt); err != nil {
			bs.Close()
			return nil, err
		}
		dev = gpu
	}
	c, err := comm.New(ctx, bs, dev, comm.Options{Timeout: cfg.Timeout})
	if err != nil {
		if gpu != nil {
			gpu.Close()
		}
		bs.Close()
		return nil, err
	}
	rc := &RankComm{c: c, gpu: gpu}
	if gpu != nil {
		rc.coll = newCollState(gpuDevice{rankGPU{rc}})
	} else {
		rc.coll = newCollState(hostDevice{rc})
	}
	rc.coll.explain = rc.explain
	return rc, nil
}

// openGPU opens this rank's GPU: the local rank comes from the launcher,
// or, when it did not say, from the ranks' node identities.
func openGPU(bs *bootstrap.Bootstrap, opt CommOptions) (*cudadev.Device, error) {
	ipc := opt.CUDAIPC
	if ipc == "" {
		ipc = os.Getenv("MSCCL_CUDA_IPC")
	}
	mode, err := cudadev.ParseIPC(ipc)
	if err != nil {
		return nil, err
	}
	local := bs.Config().LocalRank
	if local < 0 {
		nodes := bs.Nodes()
		local = 0
		for r := 0; r < bs.Rank(); r++ {
			if nodes[r] == nodes[bs.Rank()] {
				local++
			}
		}
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("msccl: rank %d: %w", bs.Rank(), err)
	}
	ord, err := cudadev.Select(opt.CUDADevice, local, n)
	if err != nil {
		return nil, fmt.Errorf("msccl: rank %d: %w", bs.Rank(), err)
	}
	d, err := cudadev.Open(cudadev.Options{Ordinal: ord, IPC: mode})
	if err != nil {
		return nil, fmt.Errorf("msccl: rank %d: %w", bs.Rank(), err)
	}
	return d, nil
}

// Device is "cpu" or "cuda".
func (c *RankComm) Device() string { return c.c.Device().Name() }

// Rank is this process's rank; Size the number of ranks in the job.
func (c *RankComm) Rank() int { return c.c.Rank() }
func (c *RankComm) Size() int { return c.c.Size() }

// Barrier waits for every rank of the job.
func (c *RankComm) Barrier(ctx context.Context) error { return c.c.Bootstrap().Barrier(ctx) }

// SameNode reports whether rank r shares this rank's node (its buffers
// are then mapped here: RankBuffers.OutputOf reads them).
func (c *RankComm) SameNode(r int) bool { return c.c.SameNode(r) }

// Send and Recv carry the application's own messages between ranks
// through the bootstrap, ordered per (peer, tag); tags below 0x6d730000
// are the application's.
func (c *RankComm) Send(ctx context.Context, peer, tag int, data []byte) error {
	return c.c.Bootstrap().Send(ctx, peer, tag, data)
}
func (c *RankComm) Recv(ctx context.Context, peer, tag int) ([]byte, error) {
	return c.c.Bootstrap().Recv(ctx, peer, tag)
}

// Close closes the plans the collectives opened, leaves the job and
// releases the GPU. Close RankExecs and free RankBuffers first.
func (c *RankComm) Close() error {
	err := c.coll.close()
	if e := c.c.Close(); err == nil {
		err = e
	}
	if c.gpu != nil {
		if e := c.gpu.Close(); err == nil {
			err = e
		}
	}
	return err
}

// RankExec runs one plan on this rank.
type RankExec struct {
	x rankExecutor
}

// RankBuffers are this rank's buffers for one message size.
type RankBuffers struct {
	b rankBuffers
}

// Open prepares p on this rank: every rank calls it with the same plan,
// whose rank count is the job's. opt.Timeout is the watchdog of one wait
// (0: 10 s on the cpu device, 5 s on cuda).
func (c *RankComm) Open(ctx context.Context, p *Plan, opt Options) (*RankExec, error) {
	if c.gpu != nil {
		if opt.ProxyHandler != nil {
			return nil, fmt.Errorf("msccl: Options.ProxyHandler: a rank of a cuda job copies port channels with its own threads (the host proxy needs every rank in one process: msccl.Open); custom handlers run on the cpu device and with Open")
		}
		ex, err := cudaexec.OpenRank(ctx, c.c, p, cudaexec.Options{Timeout: opt.Timeout})
		if err != nil {
			return nil, err
		}
		return &RankExec{x: cudaRank{ex: ex, ll: opt.LLWidth}}, nil
	}
	ex, err := host.Open(ctx, c.c, p, host.Options{Timeout: opt.Timeout, LLWidth: opt.LLWidth, ProxyHandler: opt.ProxyHandler})
	if err != nil {
		return nil, err
	}
	return &RankExec{x: hostRank{ex}}, nil
}

// Alloc allocates this rank's buffers for a message of size bytes (as
// nccl-tests counts it; within the plan's size rule). Every rank calls it
// with the same size.
func (e *RankExec) Alloc(ctx context.Context, size int64) (*RankBuffers, error) {
	b, err := e.x.alloc(ctx, size)
	if err != nil {
		return nil, err
	}
	return &RankBuffers{b}, nil
}

// Run runs the collective once on this rank and returns when this rank's
// part is done; every rank runs the same sequence of collectives.
func (e *RankExec) Run(ctx context.Context, b *RankBuffers, dt DType, red ReduceOp) error {
	return e.x.run(ctx, b.b, dt, red)
}

// Start begins the collective on this rank; Wait ends every collective
// started. On the cuda device Start only enqueues the kernel (the
// buffers are the kernel's until Wait), so that back-to-back
// collectives pay no wait each; on the cpu device Start is Run.
func (e *RankExec) Start(ctx context.Context, b *RankBuffers, dt DType, red ReduceOp) error {
	return e.x.start(ctx, b.b, dt, red)
}

// Prepare builds what a collective of (dt, red) on b needs on the cuda
// device (op tables, the kernel) without running it, so that Enqueue
// makes nothing but the launch (legal inside a CUDA graph capture); on
// the cpu device it does nothing. Collective on the cuda device, as the
// first Run, Start or Enqueue of (dt, red) on b is: every rank prepares
// the same at the same point of its sequence of collectives.
func (e *RankExec) Prepare(b *RankBuffers, dt DType, red ReduceOp) error {
	return e.x.prepare(b.b, dt, red)
}

// Enqueue launches the collective on stream (a CUstream of this
// process's context, such as torch.cuda.current_stream().cuda_stream)
// without waiting: the caller's later work on stream sees its result,
// and a capture of stream records it. cuda device only; do not mix with
// Start/Run on the same RankExec without ordering them. Free and Close
// wait for launches enqueued outside a capture; wait for the replays of
// a captured graph yourself before them.
func (e *RankExec) Enqueue(b *RankBuffers, dt DType, red ReduceOp, stream uintptr) error {
	return e.x.enqueue(b.b, dt, red, stream)
}

// Wait waits for the collectives Start began (see Start).
func (e *RankExec) Wait() error { return e.x.wait() }

// Close releases the plan's channels on this rank.
func (e *RankExec) Close() error { return e.x.close() }

// Input and Output are this rank's buffers on the cpu device, as shared
// memory the caller reads and writes (the same bytes, or part of them,
// for in-place plans); nil on the cuda device (SetInput, OutputOf,
// InputPtr and OutputPtr serve both).
func (b *RankBuffers) Input() []byte  { return b.b.input() }
func (b *RankBuffers) Output() []byte { return b.b.output() }

// InputPtr and OutputPtr are this rank's buffers on the cuda device
// (0 on the cpu device).
func (b *RankBuffers) InputPtr() cuda.DevicePtr  { return b.b.inputPtr() }
func (b *RankBuffers) OutputPtr() cuda.DevicePtr { return b.b.outputPtr() }

// SetInput copies data, the whole input, into this rank's input buffer.
func (b *RankBuffers) SetInput(data []byte) error { return b.b.setInput(data) }

// OutputOf is rank r's output (r on this node), for checks that read
// every rank's result after a barrier: on the cpu device the shared
// memory itself, on the cuda device a copy.
func (b *RankBuffers) OutputOf(r int) ([]byte, error) { return b.b.outputOf(r) }

// Size is the message size the buffers were allocated for.
func (b *RankBuffers) Size() int64 { return b.b.size() }

// Free releases the buffers. On the cuda device it is collective (every
// rank calls it at the same point): it waits for the others before
// freeing memory their kernels may still use.
func (b *RankBuffers) Free() error { return b.b.free() }
