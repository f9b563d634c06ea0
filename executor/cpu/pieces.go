package cpu

// InputPiece is the length of the pieces an input is copied from (the
// last piece of an input may be shorter).
const InputPiece = inputPiece

// InputPieces describes the input Run feeds rank on launch (Input, for a
// plan's input of n bytes) as copies from a table: piece i, the bytes
// [i*InputPiece, min((i+1)*InputPiece, n)) of the input, is the table's
// bytes from at[i] on. A device executor's tests rebuild the input on the
// device from the table (uploaded once) and the offsets instead of moving
// every byte over the bus. at is reused when it has the room. The table
// is shared: callers must not modify it.
func InputPieces(dt DType, seed uint64, launch, rank int, n int64, at []int64) (table []byte, offsets []int64) {
	tab, w := pieceWalk(dt, seed, launch, rank)
	at = at[:0]
	for off := int64(0); off < n; off += inputPiece {
		at = append(at, int64(w.next()))
	}
	return tab, at
}

// walk draws the table offsets of an input's pieces in order.
type walk struct {
	st, starts uint64
	size       int
}

// pieceWalk returns the table of (dt, seed, rank) and the walk over the
// piece offsets of (launch, rank): the one definition fillInput and
// InputPieces share.
func pieceWalk(dt DType, seed uint64, launch, rank int) ([]byte, *walk) {
	tab := inputTable(dt, seed, dt.IsFP8() && rank%2 == 1)
	w := &walk{st: seed ^ uint64(launch+1)*0x632be59bd9b4e019 ^ uint64(rank+1)*0x85157af5, size: dt.Size()}
	splitmix(&w.st)
	w.starts = uint64((len(tab) - inputPiece) / dt.Size())
	return tab, w
}

func (w *walk) next() int { return int(splitmix(&w.st)%w.starts) * w.size }
