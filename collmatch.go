package msccl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/msccl-go/msccl-go/ir"
)

// Every rank must make the same calls in the same order; the library
// cannot order them across ranks without a round trip per call, and
// NCCL leaves that to the caller too. What it can do is name a mismatch
// once one has made a collective hang: when the watchdog stops a call,
// each rank tells the others which call it was making (its number in
// the communicator's sequence and what it was), and the error names the
// ranks whose call differs.

// tagCallCheck is the bootstrap tag of those messages.
const tagCallCheck = 0x6d737100

// callDesc says what call number seq was, the same way on every rank.
func callDesc(seq uint64, cl *Call, size int64) string {
	return fmt.Sprintf("call #%d: %s of %d bytes (%s, %s, root %d)", seq, cl.Collective, size, cl.DType, cl.Op, cl.Root)
}

// explain adds to err, a hang of this rank's call described by mine,
// the peers' calls that differ from it, when they answer within a few
// seconds; err is returned unchanged when none differs or none answers.
func (c *RankComm) explain(err error, mine string) error {
	if ir.ErrorCode(err) != ir.CodeWatchdog || c.Size() < 2 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	bs := c.c.Bootstrap()
	for q := 0; q < c.Size(); q++ {
		if q != c.Rank() {
			bs.Send(ctx, q, tagCallCheck, []byte(mine))
		}
	}
	var differ []string
	for q := 0; q < c.Size(); q++ {
		if q == c.Rank() {
			continue
		}
		theirs, rerr := bs.Recv(ctx, q, tagCallCheck)
		if rerr != nil {
			continue // no answer: that rank may be gone; the hang says so
		}
		if string(theirs) != mine {
			differ = append(differ, fmt.Sprintf("rank %d made %s", q, theirs))
		}
	}
	if len(differ) == 0 {
		return err
	}
	return fmt.Errorf("%w; the ranks made different calls (every rank must make the same calls in the same order): rank %d made %s, %s",
		err, c.Rank(), mine, strings.Join(differ, ", "))
}
