package reference

import "github.com/msccl-go/msccl-go/ir"

// Traffic is what one collective of the kernel loads from and stores to
// device memory with every rank on one GPU, for inBytes of input per
// rank: what msccl-bench --hbm divides by the reference's time, beside
// the plan's count from its ops. Per rank, chunk c (the allreduces' 1/n
// of the input, the allgather's whole input):
//   - allgather_direct: n copies of c (out of place).
//   - allreduce_twoshot: n−1 copies of c into peers' scratch, then its
//     chunk and n−1 scratch slots in, n copies of the sum out.
//   - allreduce_oneshot_ll: n−1 chunks packed (c in, 2c out each); its
//     chunk and n−1 packet slots in, the sum out once plain and n−1 times
//     as packets; n−1 packet slots unpacked (2c in, c out each).
//
// Each equals its mirror plan's count (cmd/msccl-bench's
// TestReferenceTraffic holds them together). Flag polling beyond one read
// of a packet is not counted. ok is false for a kernel without a count.
func (k Kernel) Traffic(ranks int, inBytes int64) (loads, stores int64, ok bool) {
	n := int64(ranks)
	c := inBytes
	if k.Collective != ir.AllGather {
		c = inBytes / n
	}
	var l, s int64
	switch k.Name {
	case "allreduce_oneshot_ll":
		l = (n-1)*c + c + (n-1)*2*c + (n-1)*2*c
		s = (n-1)*2*c + c + (n-1)*2*c + (n-1)*c
	case "allreduce_twoshot":
		l = (n-1)*c + n*c
		s = (n-1)*c + n*c
	case "allgather_direct":
		l, s = n*c, n*c
	default:
		return 0, 0, false
	}
	return n * l, n * s, true
}
