package ir

// Op is one operation of a thread block. Which fields are meaningful is
// given by the op table (OpInfo) for Code.
//
// Plans hold millions of ops (5.8 million for a 1024-rank ring allgather),
// and the compiler's time at that size goes to faulting in and GC-scanning
// them, so an Op keeps only what most ops use inline: the one-byte fields
// side by side in one word, the operand slices, and one pointer to the
// fields that only a few op kinds carry (tbg_info, semaphore_ids, barrier,
// pipeline). Those are read and written through methods; nil means all of
// them are absent. Setters copy the extra fields before changing them, so
// copies of an Op never see each other's changes, as with plain fields.
type Op struct {
	Code        OpCode
	ChannelType ChannelType // ChanNone when absent
	red         uint8       // index into reduceNames; redOther: the name is in x.reduce
	Src         []BufRef
	Dst         []BufRef
	ChannelIDs  []int // TB-local channel ids of ChannelType
	x           *opExtra
}

// opExtra holds the Op fields that few op kinds use.
type opExtra struct {
	// reduce is a reduce_op outside reduceOps, kept as decoded so that the
	// validator can name it.
	reduce       ReduceOp
	tbg          *TBGInfo
	semaphoreIDs []int
	barrierID    int // barrier only
	numTBs       int // barrier only: num_threadblocks
	iter         *IterContext
	ops          []Op // pipeline body
}

func (x *opExtra) empty() bool {
	return x.reduce == ReduceNone && x.tbg == nil && x.semaphoreIDs == nil && x.barrierID == 0 && x.numTBs == 0 &&
		x.iter == nil && x.ops == nil
}

// noExtra stands for the extra fields of an op that has none; never
// written.
var noExtra opExtra

func (o *Op) get() *opExtra {
	if o.x == nil {
		return &noExtra
	}
	return o.x
}

// update changes a copy of the op's extra fields through f and stores it,
// or nil when they are all absent, so that equal ops stay
// reflect.DeepEqual however they were built. absent says that f only
// clears a field, a no-op when there are no extra fields.
func (o *Op) update(absent bool, f func(x *opExtra)) {
	if absent && o.x == nil {
		return
	}
	x := new(opExtra)
	if o.x != nil {
		*x = *o.x
	}
	f(x)
	if x.empty() {
		x = nil
	}
	o.x = x
}

// reduceNames lists the reduce ops an Op stores as a small index.
var reduceNames = [...]ReduceOp{ReduceNone, ReduceSum, ReduceMin, ReduceMax, ReduceProd}

const redOther = 255

// ReduceOp is the op's reduction; ReduceNone when absent.
func (o *Op) ReduceOp() ReduceOp {
	if int(o.red) < len(reduceNames) {
		return reduceNames[o.red]
	}
	return o.x.reduce
}

// SetReduceOp sets the op's reduction. Names outside reduceOps are kept
// (for the validator to report) at the cost of the extra fields.
func (o *Op) SetReduceOp(r ReduceOp) {
	for i, n := range reduceNames {
		if n == r {
			if o.red == redOther {
				o.update(true, func(x *opExtra) { x.reduce = ReduceNone })
			}
			o.red = uint8(i)
			return
		}
	}
	o.update(false, func(x *opExtra) { x.reduce = r })
	o.red = redOther
}

// TBG is the op's tbg_info; nil when absent.
func (o *Op) TBG() *TBGInfo {
	return o.get().tbg
}

// SetTBG sets the op's tbg_info; nil removes it.
func (o *Op) SetTBG(t *TBGInfo) {
	o.update(t == nil, func(x *opExtra) { x.tbg = t })
}

// SemaphoreIDs are the rank's semaphores a sem_acquire or sem_release
// names.
func (o *Op) SemaphoreIDs() []int {
	return o.get().semaphoreIDs
}

// SetSemaphoreIDs sets the op's semaphore ids.
func (o *Op) SetSemaphoreIDs(ids []int) {
	o.update(ids == nil, func(x *opExtra) { x.semaphoreIDs = ids })
}

// BarrierID is a barrier's id.
func (o *Op) BarrierID() int {
	return o.get().barrierID
}

// NumTBs is the number of blocks a barrier waits for (num_threadblocks).
func (o *Op) NumTBs() int {
	return o.get().numTBs
}

// SetBarrier sets a barrier's id and num_threadblocks.
func (o *Op) SetBarrier(id, numTBs int) {
	o.update(id == 0 && numTBs == 0, func(x *opExtra) { x.barrierID, x.numTBs = id, numTBs })
}

// Iter is a pipeline's iter_context; nil when absent.
func (o *Op) Iter() *IterContext {
	return o.get().iter
}

// SetIter sets a pipeline's iter_context; nil removes it.
func (o *Op) SetIter(it *IterContext) {
	o.update(it == nil, func(x *opExtra) { x.iter = it })
}

// Ops is a pipeline's body.
func (o *Op) Ops() []Op {
	return o.get().ops
}

// SetOps sets a pipeline's body.
func (o *Op) SetOps(ops []Op) {
	o.update(ops == nil, func(x *opExtra) { x.ops = ops })
}
