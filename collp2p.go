package msccl

import (
	"context"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// tagP2P is the bootstrap tag of SendBuf/RecvBuf's messages, in the
// communicator's range (application tags are below 0x6d730000):
// messages of one (peer, tag) arrive in the order they were sent, which
// is NCCL's matching rule for send and recv.
const tagP2P = 0x6d737000

// SendBuf sends buf to rank peer, whose RecvBuf of the same length
// receives it; sends to one peer are received in the order they were
// made. It returns once the data is on its way (the buffer may be
// reused). On the cuda device buf is device memory and the send waits
// for the work queued on the stream (OnStream) before it reads buf. The
// data goes through the job's bootstrap: meant for control and small
// messages, not bandwidth.
func (c *RankComm) SendBuf(ctx context.Context, buf Mem, peer int, opts ...CallOption) error {
	data, err := c.p2pCheck(buf, peer, opts)
	if err != nil {
		return err
	}
	return c.coll.locked(func() error {
		if buf.gpu {
			data = make([]byte, buf.n)
			if err := cuda.StreamOf(streamOf(opts)).Synchronize(); err != nil {
				return err
			}
			if err := cuda.MemcpyDtoH(data, buf.dev); err != nil {
				return err
			}
		}
		if peer == c.Rank() {
			c.coll.self = append(c.coll.self, append([]byte(nil), data...))
			return nil
		}
		return c.c.Bootstrap().Send(ctx, peer, tagP2P, data)
	})
}

// RecvBuf receives into buf what rank peer's SendBuf sent, which must
// be buf's length. On the cuda device the data is in buf when RecvBuf
// returns (work queued on the stream afterwards sees it).
func (c *RankComm) RecvBuf(ctx context.Context, buf Mem, peer int, opts ...CallOption) error {
	if _, err := c.p2pCheck(buf, peer, opts); err != nil {
		return err
	}
	return c.coll.locked(func() error {
		var data []byte
		if peer == c.Rank() {
			if len(c.coll.self) == 0 {
				return diag.Errorc(diag.CodeBadOptions, "msccl: recv from this rank itself (%d) with no send to itself before it", peer)
			}
			data, c.coll.self = c.coll.self[0], c.coll.self[1:]
		} else {
			var err error
			if data, err = c.c.Bootstrap().Recv(ctx, peer, tagP2P); err != nil {
				return err
			}
		}
		if int64(len(data)) != buf.n {
			return diag.Errorc(diag.CodeSizeRefused, "msccl: recv of %d bytes from rank %d, which sent %d", buf.n, peer, len(data))
		}
		if buf.gpu {
			if err := cuda.StreamOf(streamOf(opts)).Synchronize(); err != nil {
				return err
			}
			return cuda.MemcpyHtoD(buf.dev, data)
		}
		copy(buf.host, data)
		return nil
	})
}

// p2pCheck refuses a peer outside the job and memory of the other
// device; on the cpu device it returns buf's bytes.
func (c *RankComm) p2pCheck(buf Mem, peer int, opts []CallOption) ([]byte, error) {
	if peer < 0 || peer >= c.Size() {
		return nil, diag.Errorc(diag.CodeBadOptions, "msccl: peer %d is not a rank of %d", peer, c.Size())
	}
	dev := c.Device()
	if buf.lenOnly || (buf.n > 0 && buf.gpu != (dev == "cuda")) {
		return nil, diag.Errorc(diag.CodeBadOptions, "msccl: send/recv: the buffer is not %s device memory", dev)
	}
	if dev != "cuda" && streamOf(opts) != 0 {
		return nil, diag.Errorc(diag.CodeBadOptions, "msccl: send/recv: the cpu device takes stream 0")
	}
	return buf.host, nil
}

// streamOf is the stream opts name (0 when none).
func streamOf(opts []CallOption) uintptr {
	var cl Call
	for _, o := range opts {
		o(&cl)
	}
	return cl.Stream
}
