package bootstrap

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// samples is one well-formed message of every kind.
func samples() []*msg {
	n16, n32 := bytes.Repeat([]byte{7}, nonceLen), bytes.Repeat([]byte{9}, macLen)
	return []*msg{
		{kind: kChallenge, nonce: n16},
		{kind: kHello, rank: 3, world: 16, ms: 30000, nonce: n16, node: "gpu07", mac: n32},
		{kind: kAccept, mac: n32},
		{kind: kReject, text: "authentication failed"},
		{kind: kWelcome, list: [][]byte{[]byte("a"), []byte("b")}},
		{kind: kGather, seq: 1, op: opAllGather, ms: 5, data: []byte("blob")},
		{kind: kGather, seq: 2, op: opBarrier},
		{kind: kGathered, seq: 1, list: [][]byte{{1}, {}, {2, 3}}},
		{kind: kSend, peer: 5, tag: -3, data: []byte("hi")},
		{kind: kDeliver, peer: 0, tag: 1 << 40, data: nil},
		{kind: kAbort, op: abortTimeout, opName: "barrier #4", ranks: []int{2, 5}, ms: 30000, text: "x"},
		{kind: kBye},
		{kind: kLeft, peer: 9},
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, m := range samples() {
		f := encode(m)
		kind, body, err := readFrame(bytes.NewReader(f), frameLimit)
		if err != nil {
			t.Fatalf("%s: %v", kindName(m.kind), err)
		}
		got, err := decode(kind, body)
		if err != nil {
			t.Fatalf("%s: %v", kindName(m.kind), err)
		}
		if !bytes.Equal(encode(got), f) {
			t.Errorf("%s: round trip changed the frame", kindName(m.kind))
		}
		// Every proper prefix of a frame is an error, never a message.
		for i := 0; i < len(f); i++ {
			_, _, err := readFrame(bytes.NewReader(f[:i]), frameLimit)
			if err == nil {
				t.Errorf("%s: %d-byte prefix read as a frame", kindName(m.kind), i)
			}
			if i > 0 && i < 4 && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s: %d-byte prefix: %v", kindName(m.kind), i, err)
			}
			if i > 4 && !errors.Is(err, errFrame) {
				t.Errorf("%s: %d-byte prefix: %v, want a truncated-frame error", kindName(m.kind), i, err)
			}
		}
	}
}

func TestWireLimits(t *testing.T) {
	huge := []byte{0x7f, 0xff, 0xff, 0xff, kSend}
	if _, _, err := readFrame(bytes.NewReader(huge), handshakeLimit); !errors.Is(err, errFrame) {
		t.Errorf("oversized frame: %v", err)
	}
	if _, _, err := readFrame(bytes.NewReader([]byte{0, 0, 0, 0}), frameLimit); !errors.Is(err, errFrame) {
		t.Errorf("empty frame: %v", err)
	}
	// A list that claims more items than bytes left must not allocate.
	if _, err := decode(kGathered, []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}); !errors.Is(err, errFrame) {
		t.Errorf("lying list count: %v", err)
	}
	if _, err := decode(kHello, append([]byte{1, 2, 3}, make([]byte, 100)...)); !errors.Is(err, errFrame) {
		t.Errorf("hello with trailing bytes: %v", err)
	}
}

// FuzzFrame feeds arbitrary bytes to the frame reader and decoder, as a
// hostile or broken peer would: no panic, and whatever decodes re-encodes
// to a frame that decodes to the same message.
func FuzzFrame(f *testing.F) {
	for _, m := range samples() {
		f.Add(encode(m))
	}
	f.Add([]byte{0, 0, 0, 3, kGather, 0x80})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, kSend})
	f.Add([]byte{0, 0, 0, 6, kGathered, 1, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			kind, body, err := readFrame(r, 1<<16)
			if err != nil {
				return
			}
			m, err := decode(kind, body)
			if err != nil {
				if !errors.Is(err, errFrame) {
					t.Fatalf("decode error does not wrap errFrame: %v", err)
				}
				continue
			}
			f1 := encode(m)
			k2, b2, err := readFrame(bytes.NewReader(f1), frameLimit)
			if err != nil {
				t.Fatalf("re-read: %v", err)
			}
			m2, err := decode(k2, b2)
			if err != nil {
				t.Fatalf("re-decode of %s: %v", kindName(m.kind), err)
			}
			if !bytes.Equal(encode(m2), f1) {
				t.Fatalf("%s does not round-trip", kindName(m.kind))
			}
		}
	})
}
