package compiler

import "github.com/msccl-go/msccl-go/internal/par"

// minShardWorkers: below this many workers the walk's stages already fill
// the cores, and more than one shard only adds work (each shard follows
// every node).
const minShardWorkers = 4

// walkSharded is walk in three stages, for more than one core: deps'
// gather and record in shards, its group in a merger, then order. Shards
// own the chunks of contiguous rank ranges: each follows every node in
// program order, but reads and records only its own chunks, and lists
// per node the producers it found. The merger takes the shards' lists
// batch by batch, joins them per node and groups them (group) into
// order's records, which order consumes as in walk. group sorts what it
// is given, so the records are deps' own whatever the number of shards; a
// second packet write (deps' one diagnostic) cannot happen, as the walk
// is sharded only for programs without packet writes.
func (s *syncer) walkSharded(shards int) {
	n, ranks := len(s.nodes), s.p.hdr.ranks
	nb := (n + walkBatch - 1) / walkBatch
	// Buffers for every batch, so that no phase but order's input waits:
	// with any schedule of the goroutines, every one finishes.
	lists := make([]chan []int32, shards)
	for k := range lists {
		lists[k] = make(chan []int32, nb)
	}
	full := make(chan []int32, nb)
	par.ForEach(shards+2, shards+2, func(_, job int) {
		switch {
		case job < shards:
			s.shard(job*ranks/shards, (job+1)*ranks/shards, lists[job])
		case job == shards:
			s.merge(lists, full)
		default:
			for recs := range full {
				for len(recs) > 0 {
					recs = s.order(recs)
				}
			}
		}
	})
}

// shard runs deps' gather and record for the chunks of ranks [lo, hi),
// sending per batch a list: for each node that needs something there,
// seq, the count, then the producers (seq<<1 | full).
func (s *syncer) shard(lo, hi int, out chan<- []int32) {
	defer close(out)
	var need []edgeNeed
	last := 0
	for b := 0; b < len(s.nodes); b += walkBatch {
		list := make([]int32, 0, last+last/8)
		for seq := int32(b); seq < int32(min(b+walkBatch, len(s.nodes))); seq++ {
			nd := &s.nodes[seq]
			reads, writes := s.accesses(nd)
			if !touches(reads, lo, hi) && !touches(writes, lo, hi) {
				continue
			}
			need, _ = s.gather(seq, nd, reads, writes, lo, hi, need[:0])
			if len(need) > 0 {
				list = append(list, seq, int32(len(need)))
				for _, e := range need {
					x := e.seq << 1
					if e.full {
						x |= 1
					}
					list = append(list, x)
				}
			}
			s.record(seq, reads, writes, lo, hi)
		}
		last = len(list)
		out <- list
	}
}

func touches(refs []aref, lo, hi int) bool {
	for _, r := range refs {
		if r.rank >= lo && r.rank < hi {
			return true
		}
	}
	return false
}

// merge joins the shards' lists batch by batch into order's records.
func (s *syncer) merge(lists []chan []int32, full chan<- []int32) {
	defer close(full)
	cur := make([][]int32, len(lists))
	var need []edgeNeed
	last := 0
	for b := 0; b < len(s.nodes); b += walkBatch {
		for k, l := range lists {
			cur[k] = <-l
		}
		out := make([]int32, 0, last+last/8)
		for seq := int32(b); seq < int32(min(b+walkBatch, len(s.nodes))); seq++ {
			need = need[:0]
			for k, l := range cur {
				if len(l) == 0 || l[0] != seq {
					continue
				}
				c := l[1]
				for _, x := range l[2 : 2+c] {
					need = append(need, edgeNeed{seq: x >> 1, full: x&1 != 0})
				}
				cur[k] = l[2+c:]
			}
			if len(need) > 0 {
				out = s.group(seq, need, out)
			}
		}
		last = len(out)
		full <- out
	}
}

// packetWrites says whether any action writes packets.
func (s *syncer) packetWrites() bool {
	for _, a := range s.p.actions {
		for _, w := range a.dst {
			if w.packet {
				return true
			}
		}
	}
	return false
}
