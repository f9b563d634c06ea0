package socket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ChunkBytes is the largest payload of one frame: a put is sent in chunks
// of at most this size, so the receiver writes one chunk into memory
// while the next crosses the network, and no frame makes the receiver
// allocate more than this.
const ChunkBytes = 1 << 20

// Frame kinds.
const (
	kPut    = 1 // payload → buffer buf at offset off; flagLast ends the request
	kSignal = 2 // one more token on the peer's port channel ch
	kAck    = 3 // the sender has applied off requests in all
	kBye    = 4 // the sender closes its end on purpose: the EOF after it is no failure
)

const flagLast = 1

// headerBytes: kind u8, flags u8, buf u16, ch u32, off u64, len u32,
// space u32.
const headerBytes = 24

// frame is one decoded header.
type frame struct {
	kind, flags uint8
	buf         uint16
	ch          uint32
	off         uint64
	n           uint32
	space       uint32 // puts and signals: which registration they address (the handlers' agreement)
}

// errFrame marks a frame that breaks the protocol (the peer is not a
// well-behaved rank of this job, or the stream is corrupt).
var errFrame = errors.New("malformed frame")

func (f *frame) put(b []byte) {
	b[0], b[1] = f.kind, f.flags
	binary.LittleEndian.PutUint16(b[2:], f.buf)
	binary.LittleEndian.PutUint32(b[4:], f.ch)
	binary.LittleEndian.PutUint64(b[8:], f.off)
	binary.LittleEndian.PutUint32(b[16:], f.n)
	binary.LittleEndian.PutUint32(b[20:], f.space)
}

// decodeHeader checks a header without trusting the peer: known kind,
// flags only where they mean something, a payload only on puts and never
// above ChunkBytes, offsets that cannot wrap.
func decodeHeader(b []byte) (frame, error) {
	if len(b) < headerBytes {
		return frame{}, fmt.Errorf("%w: %d header bytes, want %d", errFrame, len(b), headerBytes)
	}
	f := frame{kind: b[0], flags: b[1], buf: binary.LittleEndian.Uint16(b[2:]), ch: binary.LittleEndian.Uint32(b[4:]),
		off: binary.LittleEndian.Uint64(b[8:]), n: binary.LittleEndian.Uint32(b[16:]), space: binary.LittleEndian.Uint32(b[20:])}
	switch f.kind {
	case kPut:
		if f.flags&^flagLast != 0 {
			return frame{}, fmt.Errorf("%w: put with flags %#x", errFrame, f.flags)
		}
		if f.n > ChunkBytes {
			return frame{}, fmt.Errorf("%w: put of %d bytes in one frame (at most %d)", errFrame, f.n, ChunkBytes)
		}
		if f.off > 1<<62 {
			return frame{}, fmt.Errorf("%w: put at offset %d", errFrame, f.off)
		}
	case kSignal, kAck, kBye:
		if f.flags != 0 || f.n != 0 || f.buf != 0 || (f.kind != kSignal && f.space != 0) {
			return frame{}, fmt.Errorf("%w: %s with flags %#x, space %d, buffer %d, %d payload bytes", errFrame, kindName(f.kind), f.flags, f.space, f.buf, f.n)
		}
		if f.kind != kAck && f.off != 0 {
			return frame{}, fmt.Errorf("%w: signal with offset %d", errFrame, f.off)
		}
	default:
		return frame{}, fmt.Errorf("%w: unknown kind %d", errFrame, f.kind)
	}
	return f, nil
}

func kindName(k uint8) string {
	switch k {
	case kPut:
		return "put"
	case kSignal:
		return "signal"
	case kAck:
		return "ack"
	case kBye:
		return "bye"
	}
	return fmt.Sprintf("kind %d", k)
}

// readFrame reads one header and its payload into buf (grown as needed,
// at most ChunkBytes).
func readFrame(r io.Reader, hdr []byte, buf *[]byte) (frame, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:headerBytes]); err != nil {
		return frame{}, nil, err
	}
	f, err := decodeHeader(hdr)
	if err != nil {
		return frame{}, nil, err
	}
	if f.n == 0 {
		return f, nil, nil
	}
	if cap(*buf) < int(f.n) {
		*buf = make([]byte, f.n)
	}
	p := (*buf)[:f.n]
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, nil, fmt.Errorf("%s payload: %w", kindName(f.kind), err)
	}
	return f, p, nil
}
