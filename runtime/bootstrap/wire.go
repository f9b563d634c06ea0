package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire format. Every message is one frame:
//
//	uint32 big-endian L   length of what follows (kind byte + payload), 1..limit
//	uint8  kind           one of the k* constants below
//	payload               kind-specific, built from the field codings below
//
// Fields are unsigned varints (ranks, counts, sequence numbers,
// milliseconds), signed varints (tags), fixed-size byte arrays (nonces,
// MACs) and byte strings (a uvarint length, then the bytes). Lists are a
// uvarint count followed by the items. The decoder checks every length
// against what is left of the frame before it allocates, so a malformed or
// truncated frame is an error, never a panic or a huge allocation.

// Frame kinds.
const (
	kChallenge byte = 1 + iota // root → rank: magic, root nonce
	kHello                     // rank → root: rank, world, ms left, rank nonce, node, MAC
	kAccept                    // root → rank: root's MAC
	kReject                    // root → rank: reason
	kWelcome                   // root → rank: every rank's node
	kGather                    // rank → root: seq, op, ms left, blob
	kGathered                  // root → rank: seq, every rank's blob
	kSend                      // rank → root: destination, tag, data
	kDeliver                   // root → rank: source, tag, data
	kAbort                     // root → rank: the job failed (code, op, ranks, ms, detail)
	kBye                       // rank → root: closing cleanly
	kLeft                      // root → rank: a rank closed cleanly
	kindCount
)

var kindNames = [...]string{"", "challenge", "hello", "accept", "reject", "welcome", "gather", "gathered", "send", "deliver", "abort", "bye", "left"}

// Collective ops carried by kGather.
const (
	opAllGather byte = 1
	opBarrier   byte = 2
)

// Abort codes.
const (
	abortTimeout  byte = 1 // ranks did not arrive in time
	abortDead     byte = 2 // a rank's connection broke without a bye
	abortClosed   byte = 3 // a collective needs a rank that closed cleanly
	abortProtocol byte = 4 // a rank sent something the protocol does not allow
)

const (
	magic    = "MSCCLBS1"
	nonceLen = 16
	macLen   = 32
	// handshakeLimit bounds frames read before a peer has proved it knows
	// the secret, so a stranger cannot make the root allocate.
	handshakeLimit = 4 << 10
	// frameLimit bounds every other frame: one all-gather result or one
	// send. Bootstrap traffic is handles and addresses, not tensors.
	frameLimit = 1 << 30
	// maxNode bounds a node identity (a host name is at most 255 bytes).
	maxNode = 1024
	// maxWorld bounds the world size a hello may announce.
	maxWorld = 1 << 20
)

// msg is one decoded frame; which fields are meaningful depends on kind.
type msg struct {
	kind   byte
	rank   int      // hello: sender's rank
	world  int      // hello
	peer   int      // send: destination; deliver, left: source
	tag    int64    // send, deliver
	seq    uint64   // gather, gathered
	op     byte     // gather: opAllGather|opBarrier; abort: code
	ms     uint64   // hello, gather: milliseconds left; abort: timeout
	nonce  []byte   // challenge, hello
	mac    []byte   // hello, accept
	node   string   // hello
	text   string   // reject: reason; abort: detail
	opName string   // abort: what failed ("all-gather #3", "connect")
	data   []byte   // gather, send, deliver
	list   [][]byte // welcome: nodes; gathered: blobs
	ranks  []int    // abort: the ranks at fault
}

func kindName(k byte) string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", k)
}

// errFrame marks a frame that is malformed; wrapped with what was wrong.
var errFrame = errors.New("malformed bootstrap frame")

// readFrame reads one frame of at most limit bytes (kind + payload).
func readFrame(r io.Reader, limit int) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n == 0 {
		return 0, nil, fmt.Errorf("%w: empty frame", errFrame)
	}
	if uint64(n) > uint64(limit) {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes exceeds the %d-byte limit", errFrame, n, limit)
	}
	if _, err := io.ReadFull(r, hdr[4:5]); err != nil {
		return 0, nil, truncated(err)
	}
	body := make([]byte, n-1)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, truncated(err)
	}
	return hdr[4], body, nil
}

// truncated turns an EOF inside a frame into a frame error: the peer
// stopped mid-message, which is not a clean end of stream.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated frame", errFrame)
	}
	return err
}

// decode parses a frame's payload.
func decode(kind byte, p []byte) (*msg, error) {
	d := decoder{p: p}
	m := &msg{kind: kind}
	switch kind {
	case kChallenge:
		if string(d.bytes(len(magic))) != magic && d.err == nil {
			return nil, fmt.Errorf("%w: not an msccl bootstrap peer (bad magic)", errFrame)
		}
		m.nonce = d.bytes(nonceLen)
	case kHello:
		m.rank = d.int(maxWorld)
		m.world = d.int(maxWorld)
		m.ms = d.uvarint()
		m.nonce = d.bytes(nonceLen)
		m.node = d.str(maxNode)
		m.mac = d.bytes(macLen)
	case kAccept:
		m.mac = d.bytes(macLen)
	case kReject:
		m.text = d.str(handshakeLimit)
	case kWelcome:
		m.list = d.list()
	case kGather:
		m.seq = d.uvarint()
		m.op = d.byte()
		m.ms = d.uvarint()
		m.data = d.blob()
		if d.err == nil && m.op != opAllGather && m.op != opBarrier {
			return nil, fmt.Errorf("%w: gather with unknown op %d", errFrame, m.op)
		}
	case kGathered:
		m.seq = d.uvarint()
		m.list = d.list()
	case kSend, kDeliver:
		m.peer = d.int(maxWorld)
		m.tag = d.varint()
		m.data = d.blob()
	case kAbort:
		m.op = d.byte()
		m.opName = d.str(handshakeLimit)
		n := d.int(maxWorld)
		for i := 0; i < n && d.err == nil; i++ {
			m.ranks = append(m.ranks, d.int(maxWorld))
		}
		m.ms = d.uvarint()
		m.text = d.str(frameLimit)
	case kBye:
	case kLeft:
		m.peer = d.int(maxWorld)
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", errFrame, kind)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %s: %s", errFrame, kindName(kind), d.err)
	}
	if len(d.p) != 0 {
		return nil, fmt.Errorf("%w: %s: %d trailing bytes", errFrame, kindName(kind), len(d.p))
	}
	return m, nil
}

// encode builds the frame (header included) for m.
func encode(m *msg) []byte {
	b := make([]byte, 5, 64+len(m.data))
	b[4] = m.kind
	switch m.kind {
	case kChallenge:
		b = append(b, magic...)
		b = append(b, m.nonce...)
	case kHello:
		b = binary.AppendUvarint(b, uint64(m.rank))
		b = binary.AppendUvarint(b, uint64(m.world))
		b = binary.AppendUvarint(b, m.ms)
		b = append(b, m.nonce...)
		b = appendBlob(b, []byte(m.node))
		b = append(b, m.mac...)
	case kAccept:
		b = append(b, m.mac...)
	case kReject:
		b = appendBlob(b, []byte(m.text))
	case kWelcome:
		b = appendList(b, m.list)
	case kGather:
		b = binary.AppendUvarint(b, m.seq)
		b = append(b, m.op)
		b = binary.AppendUvarint(b, m.ms)
		b = appendBlob(b, m.data)
	case kGathered:
		b = binary.AppendUvarint(b, m.seq)
		b = appendList(b, m.list)
	case kSend, kDeliver:
		b = binary.AppendUvarint(b, uint64(m.peer))
		b = binary.AppendVarint(b, m.tag)
		b = appendBlob(b, m.data)
	case kAbort:
		b = append(b, m.op)
		b = appendBlob(b, []byte(m.opName))
		b = binary.AppendUvarint(b, uint64(len(m.ranks)))
		for _, r := range m.ranks {
			b = binary.AppendUvarint(b, uint64(r))
		}
		b = binary.AppendUvarint(b, m.ms)
		b = appendBlob(b, []byte(m.text))
	case kLeft:
		b = binary.AppendUvarint(b, uint64(m.peer))
	}
	binary.BigEndian.PutUint32(b[:4], uint32(len(b)-4))
	return b
}

func appendBlob(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendList(b []byte, l [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, p := range l {
		b = appendBlob(b, p)
	}
	return b
}

// decoder reads fields from a payload; the first error sticks and every
// later read returns zero values, so decode checks d.err once at the end.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.p) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

func (d *decoder) uvarint() uint64 { return readVarint(d, binary.Uvarint) }
func (d *decoder) varint() int64   { return readVarint(d, binary.Varint) }

// readVarint reads one varint with read (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.p)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.p = d.p[n:]
	return v
}

// int reads a uvarint that must be below limit.
func (d *decoder) int(limit int) int {
	v := d.uvarint()
	if v >= uint64(limit) {
		d.fail("value %d out of range (limit %d)", v, limit)
		return 0
	}
	return int(v)
}

// bytes reads n fixed bytes (copied, so frames can be reused).
func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.p) < n {
		d.fail("truncated: need %d bytes, have %d", n, len(d.p))
		return nil
	}
	out := append([]byte(nil), d.p[:n]...)
	d.p = d.p[n:]
	return out
}

// blob reads a length-prefixed byte string; its length must fit in what
// is left of the frame.
func (d *decoder) blob() []byte {
	n, ok := d.count("byte string of %d bytes")
	if !ok {
		return nil
	}
	return d.bytes(n)
}

// count reads a length or count that cannot exceed the bytes left in the
// frame (each unit takes at least one byte), so that a hostile count
// allocates nothing; what names it in the error ("list of %d items").
func (d *decoder) count(what string) (int, bool) {
	n := d.uvarint()
	if d.err != nil {
		return 0, false
	}
	if n > uint64(len(d.p)) {
		d.fail(what+" overruns the frame (%d bytes left)", n, len(d.p))
		return 0, false
	}
	return int(n), true
}

func (d *decoder) str(limit int) string {
	b := d.blob()
	if len(b) > limit {
		d.fail("string of %d bytes exceeds %d", len(b), limit)
	}
	return string(b)
}

// list reads a count and that many byte strings; every string takes at
// least one byte, which bounds the count by what is left.
func (d *decoder) list() [][]byte {
	n, ok := d.count("list of %d items")
	if !ok {
		return nil
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.blob())
	}
	return out
}
