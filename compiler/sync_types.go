package compiler

import (
	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/ir"
)

// chanPair is one channel between two thread blocks of two ranks: block
// tbA of rankA holds one end, tbB of rankB the other (tb -1: no block of
// that rank uses its end, as for a put that needs a channel only to reach
// the peer's memory). Pairs are created on demand and turned into paired
// GPU channel entries by buildPlan.
type chanPair struct {
	rankA, tbA, rankB, tbB int
	typ                    ir.ChannelType
}

// pairKey normalises a pair so both ends find the same one.
func pairKey(r1, t1, r2, t2 int, typ ir.ChannelType) chanPair {
	if r1 > r2 {
		r1, t1, r2, t2 = r2, t2, r1, t1
	}
	return chanPair{rankA: r1, tbA: t1, rankB: r2, tbB: t2, typ: typ}
}

// semPair is a semaphore of one rank released by block from, acquired by
// block to.
type semPair struct{ rank, from, to int }

type itemKind uint8

const (
	itemAct itemKind = iota
	itemNop
	itemSignal
	itemWait
	itemRlxSignal
	itemRlxWait
	itemSemRelease
	itemSemAcquire
	itemFlush
)

// item is one entry of a block's final op list before ids are resolved.
type item struct {
	kind  itemKind
	act   *action
	pair  chanPair   // signal/wait channel
	pairs []chanPair // flush: several channels (pair unused)
	sem   semPair
	pos   *dsl.Range // source the op is reported at (shared, not copied)
}
