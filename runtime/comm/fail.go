package comm

import (
	"context"

	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

// tagFailed carries a failing rank's reason to the others (inside the
// communicator's tag range, from 0x6d730000).
const tagFailed = 0x6d73_f000

// maxReason bounds the reason sent: the others quote it in their error.
const maxReason = 4 << 10

// Fail ends the job with err as the reason, for every rank: this rank's
// communicator fails with err, and each other rank's fails naming this
// rank and quoting err as soon as this rank leaves (Close, which follows),
// instead of only saying, after the closed-peer grace, that it left. A
// rank that gives up on its own (a plan its device refuses, memory it
// cannot get, a cancelled context) calls it before Close, so that every
// rank says why the job ended.
func (c *Comm) Fail(err error) {
	if err == nil {
		return
	}
	c.setErr(err)
	why := []byte(err.Error())
	if len(why) > maxReason {
		why = append(why[:maxReason:maxReason], "..."...)
	}
	for r := range c.size {
		if r != c.rank {
			// Relayed in order ahead of this rank's bye, so the reason
			// is there when the others see it leave. A send that fails
			// finds the job already failed: the peers learn it anyway.
			_ = c.bs.Send(context.Background(), r, tagFailed, why)
		}
	}
}

// leftFailed is the failure of the first rank in left, not yet in asked,
// that sent a reason with Fail before it left, or nil; every rank it
// looks at goes into asked.
func (c *Comm) leftFailed(ctx context.Context, left []int, asked map[int]bool) error {
	for _, r := range left {
		if !asked[r] {
			asked[r] = true
			if why := c.failedReason(ctx, r); why != "" {
				return failedPeer(r, why)
			}
		}
	}
	return nil
}

// failedReason is the reason rank r sent with Fail before it left, or
// "". r has left, so the receive does not wait: the reason arrived
// before r's departure or never.
func (c *Comm) failedReason(ctx context.Context, r int) string {
	b, err := c.bs.Recv(ctx, r, tagFailed)
	if err != nil {
		return ""
	}
	return string(b)
}

// failedPeer is the error of a rank whose peer r failed for why.
func failedPeer(r int, why string) error {
	return &bootstrap.PeerError{Op: "communicator", Rank: r, Closed: true, Detail: "it failed and left the job: " + why}
}
