package compiler

import (
	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// The forms the passes hand on (passes.go), one at a time: each pass
// takes the one the pass before returned and nothing else of it, so a
// pass's signature is all it reads and writes of the pipeline.

// evaluated is the ops form: evaluate's result, lower's input.
type evaluated struct {
	hdr header
	ops []*evOp // program order
}

// program is the action form: lower's result, placed on thread blocks
// by assign-tbs, rewritten by instances and fuse, read by sync.
type program struct {
	// hdr is evaluate's header; instances scales its chunk counts.
	hdr     header
	actions []*action // program order
	// blocks holds the same actions by thread block: [rank][tb], tb ids
	// dense; nil until assign-tbs.
	blocks [][]*block
	// explicit says the program is channel-level: no sync is inserted.
	explicit bool
}

// built is the plan form: the plan sync writes and its source map (the
// statement behind each op), which fuse-sync rewrites together and limits
// checks.
type built struct {
	plan *ir.Plan
	sm   *SourceMap
	// explicit says the program was channel-level; acts are then its
	// actions, which limits' balance check reads (nil for chunk-level
	// programs, whose millions of actions the plan no longer needs).
	explicit bool
	acts     []*action
}

// header is the evaluated collective header, params and options.
type header struct {
	collective    ir.Collective
	inplace       bool
	chunks        int
	ranks         int
	nodes         int
	gpusPerNode   int
	inChunks      int
	outChunks     int
	root          int   // broadcast, reduce, gather, scatter
	peers         []int // sendrecv; nil for the default (r+1) mod ranks
	protocol      ir.Protocol
	instances     int
	threads       int
	minMsg        uint64
	maxMsg        uint64
	doubleScratch bool
	reuse         bool
	name          string
	reduce        ir.ReduceOp
	intra, inter  ir.ChannelType
	pos           dsl.Range
}
