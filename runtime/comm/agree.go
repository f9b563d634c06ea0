package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
)

// SameInt64 checks that every rank passes the same v (a message size:
// the ranks' buffers and chunk geometry must agree), naming the ranks
// that differ and their values. Collective.
func (c *Comm) SameInt64(ctx context.Context, what string, v int64) error {
	all, err := c.bs.AllGather(ctx, binary.LittleEndian.AppendUint64(nil, uint64(v)))
	if err != nil {
		return fmt.Errorf("comm: rank %d: comparing %ss: %w", c.rank, what, err)
	}
	var other []string
	for r, b := range all {
		if len(b) != 8 || int64(binary.LittleEndian.Uint64(b)) != v {
			other = append(other, fmt.Sprintf("rank %d has %d", r, int64(binary.LittleEndian.Uint64(append(b, make([]byte, 8)...)))))
		}
	}
	if len(other) > 0 {
		return fmt.Errorf("comm: rank %d has %s %d but %s: every rank must use the same", c.rank, what, v, strings.Join(other, ", "))
	}
	return nil
}
