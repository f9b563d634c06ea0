package msccl

import (
	"context"
	"fmt"
	"time"

	"github.com/msccl-go/msccl-go/executor/host"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cpudev"
)

// RankComm is this process's rank in a job of one process per rank,
// started by msccl-bench --procs, torchrun, mpirun or srun.
type RankComm struct {
	c *comm.Comm
}

// CommOptions configure OpenComm.
type CommOptions struct {
	// Device is where the rank's buffers live: "cpu" (shared memory
	// between the node's processes; plans run on CPU threads). The
	// multi-process CUDA device is not built yet.
	Device string
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
	if opt.Device != "cpu" {
		return fmt.Errorf("msccl: device %q: OpenComm supports \"cpu\" (a multi-process CUDA device is not built yet; Open runs every rank of a plan on one GPU)", opt.Device)
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
	c, err := comm.New(ctx, bs, cpudev.Device{}, comm.Options{Timeout: cfg.Timeout})
	if err != nil {
		bs.Close()
		return nil, err
	}
	return &RankComm{c: c}, nil
}

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

// Close leaves the job. Close RankExecs and free RankBuffers first.
func (c *RankComm) Close() error { return c.c.Close() }

// RankExec runs one plan on this rank.
type RankExec struct {
	ex *host.Executor
}

// RankBuffers are this rank's buffers for one message size.
type RankBuffers = host.Buffers

// Open prepares p on this rank: every rank calls it with the same plan,
// whose rank count is the job's. opt.Timeout is the watchdog of one wait
// (0: 10 s).
func (c *RankComm) Open(ctx context.Context, p *Plan, opt Options) (*RankExec, error) {
	ex, err := host.Open(ctx, c.c, p, host.Options{Timeout: opt.Timeout, LLWidth: opt.LLWidth})
	if err != nil {
		return nil, err
	}
	return &RankExec{ex: ex}, nil
}

// Alloc allocates this rank's buffers for a message of size bytes (as
// nccl-tests counts it; within the plan's size rule). Every rank calls it
// with the same size.
func (e *RankExec) Alloc(ctx context.Context, size int64) (*RankBuffers, error) {
	return e.ex.Alloc(ctx, size)
}

// Run runs the collective once on this rank and returns when this rank's
// part is done; every rank runs the same sequence of collectives.
func (e *RankExec) Run(ctx context.Context, b *RankBuffers, dt DType, red ReduceOp) error {
	return e.ex.Run(ctx, b, dt, red)
}

// Close releases the plan's channels on this rank.
func (e *RankExec) Close() error { return e.ex.Close() }
