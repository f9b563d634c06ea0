package msccl

// Fail ends the job with err as the reason on every rank: this rank's
// communicator fails with err, and every other rank's fails naming this
// rank and quoting err as soon as this rank leaves (Close, which
// follows), rather than only saying, half a second later, that it left.
// A rank that gives up on its own (a plan or size its device refuses,
// memory it cannot get, a cancelled context) calls it before Close.
func (c *RankComm) Fail(err error) { c.c.Fail(err) }
