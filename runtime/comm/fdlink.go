package comm

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// A link is a Unix stream connection to one peer on this node. It carries
// framed messages (8-byte header: payload length, descriptor count) and
// passes at most one file descriptor per message with SCM_RIGHTS.
// Messages go strictly in the order both sides call send and recv, which
// is the order of the collective calls that use them.
type link struct {
	peer int
	c    *net.UnixConn
}

// maxFrame bounds a frame's payload: handles are a few dozen bytes, so a
// larger length is a corrupt stream, refused before allocating.
const maxFrame = 1 << 20

func (l *link) send(data []byte, fd int, deadline time.Time) error {
	if len(data) > maxFrame {
		return fmt.Errorf("message of %d bytes to rank %d exceeds %d", len(data), l.peer, maxFrame)
	}
	msg := make([]byte, 8+len(data))
	binary.LittleEndian.PutUint32(msg, uint32(len(data)))
	var oob []byte
	if fd >= 0 {
		binary.LittleEndian.PutUint32(msg[4:], 1)
		oob = syscall.UnixRights(fd)
	}
	copy(msg[8:], data)
	l.c.SetWriteDeadline(deadline)
	n, _, err := l.c.WriteMsgUnix(msg, oob, nil)
	if err == nil && n < len(msg) {
		// The descriptor went with the first bytes; the rest is plain.
		_, err = l.c.Write(msg[n:])
	}
	if err != nil {
		return fmt.Errorf("sending to rank %d over its Unix socket: %w", l.peer, err)
	}
	return nil
}

// recv reads one message; fd is -1 when it carried none. A received
// descriptor is the caller's to close.
func (l *link) recv(deadline time.Time) (data []byte, fd int, err error) {
	fd = -1
	l.c.SetReadDeadline(deadline)
	hdr := make([]byte, 8)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := l.c.ReadMsgUnix(hdr, oob)
	if err == nil && oobn > 0 {
		fd, err = parseRights(oob[:oobn])
	}
	if err == nil && n < len(hdr) {
		_, err = io.ReadFull(l.c, hdr[n:])
	}
	if err != nil {
		if fd >= 0 {
			syscall.Close(fd)
		}
		if errors.Is(err, io.EOF) {
			return nil, -1, fmt.Errorf("rank %d closed its Unix socket (it exited or failed)", l.peer)
		}
		return nil, -1, fmt.Errorf("receiving from rank %d over its Unix socket: %w", l.peer, err)
	}
	size, nfd := binary.LittleEndian.Uint32(hdr), binary.LittleEndian.Uint32(hdr[4:])
	fail := func(e error) ([]byte, int, error) {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return nil, -1, e
	}
	switch {
	case size > maxFrame:
		return fail(fmt.Errorf("rank %d sent a frame of %d bytes (corrupt stream)", l.peer, size))
	case nfd > 1 || (nfd == 1) != (fd >= 0):
		return fail(fmt.Errorf("rank %d's message announces %d descriptors, %d arrived", l.peer, nfd, btoi(fd >= 0)))
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(l.c, data); err != nil {
		return fail(fmt.Errorf("receiving from rank %d over its Unix socket: %w", l.peer, err))
	}
	return data, fd, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseRights returns the one descriptor of a control message, closing
// any extra ones a misbehaving peer sent.
func parseRights(oob []byte) (int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, fmt.Errorf("control message: %w", err)
	}
	fd := -1
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				syscall.Close(f)
			}
		}
	}
	return fd, nil
}

func (l *link) close() error { return l.c.Close() }

// listenLinks opens an abstract-namespace Unix socket (Linux; nothing in
// the file system to leak when a process dies) with a random name, and a
// random token a peer must present to be accepted.
func listenLinks() (*net.UnixListener, string, [16]byte, error) {
	var tok [16]byte
	var nonce [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, "", tok, err
	}
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, "", tok, err
	}
	name := "@msccl-" + hex.EncodeToString(nonce[:])
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, "", tok, fmt.Errorf("listening on Unix socket %s: %w", name, err)
	}
	return ln, name, tok, nil
}

// dialLink connects to a peer's socket and introduces this rank with the
// peer's token (learnt over the bootstrap, so only members of the job
// know it).
func dialLink(peer, self int, name string, tok [16]byte, deadline time.Time) (*link, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("unix", name)
	if err != nil {
		return nil, fmt.Errorf("connecting to rank %d's Unix socket %s: %w", peer, name, err)
	}
	l := &link{peer: peer, c: c.(*net.UnixConn)}
	hello := make([]byte, 20)
	binary.LittleEndian.PutUint32(hello, uint32(self))
	copy(hello[4:], tok[:])
	if err := l.send(hello, -1, deadline); err != nil {
		c.Close()
		return nil, err
	}
	return l, nil
}

// acceptLinks accepts one connection from each rank in want, checking
// the token; strangers (a wrong token, an unexpected rank, garbage, or
// silence) are dropped without holding up the ranks that do belong.
func acceptLinks(ln *net.UnixListener, want map[int]bool, tok [16]byte, deadline time.Time) (map[int]*link, error) {
	type hello struct {
		rank int
		l    *link
	}
	hellos := make(chan hello)
	done := make(chan struct{})
	defer close(done)
	ln.SetDeadline(deadline)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				acceptErr <- err
				return
			}
			// Each connection introduces itself on its own goroutine, so
			// a silent one cannot block the others.
			go func() {
				l := &link{peer: -1, c: c}
				data, fd, err := l.recv(deadline)
				if fd >= 0 {
					syscall.Close(fd)
				}
				if err != nil || len(data) != 20 || [16]byte(data[4:]) != tok {
					c.Close()
					return
				}
				l.peer = int(binary.LittleEndian.Uint32(data))
				select {
				case hellos <- hello{l.peer, l}:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	got := map[int]*link{}
	fail := func(err error) (map[int]*link, error) {
		for _, l := range got {
			l.close()
		}
		var missing []int
		for r := range want {
			if got[r] == nil {
				missing = append(missing, r)
			}
		}
		return nil, fmt.Errorf("waiting for ranks %v to connect to this rank's Unix socket: %w", sorted(missing), err)
	}
	for len(got) < len(want) {
		select {
		case h := <-hellos:
			if !want[h.rank] || got[h.rank] != nil {
				h.l.close()
				continue
			}
			got[h.rank] = h.l
		case err := <-acceptErr:
			return fail(err)
		}
	}
	return got, nil
}
