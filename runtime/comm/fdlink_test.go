package comm

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A stranger (wrong token, or a rank not expected) is dropped; the ranks
// that present the token are accepted.
func TestAcceptRefusesStrangers(t *testing.T) {
	ln, name, tok, err := listenLinks()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(5 * time.Second)
	type res struct {
		links map[int]*link
		err   error
	}
	done := make(chan res, 1)
	go func() {
		l, err := acceptLinks(ln, map[int]bool{3: true}, tok, deadline)
		done <- res{l, err}
	}()
	bad := tok
	bad[0] ^= 1
	var strangers []*link
	for _, c := range []struct {
		rank int
		tok  [16]byte
	}{{3, bad}, {5, tok}} {
		l, err := dialLink(0, c.rank, name, c.tok, deadline)
		if err != nil {
			t.Fatal(err)
		}
		strangers = append(strangers, l)
	}
	// A silent stranger must not hold up the rank behind it.
	silent, err := net.Dial("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Raw garbage, too.
	raw, err := net.Dial("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	good, err := dialLink(0, 3, name, tok, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer good.close()
	r := <-done
	if r.err != nil || len(r.links) != 1 || r.links[3] == nil {
		t.Fatalf("accepted %v, %v; want rank 3 only", r.links, r.err)
	}
	defer r.links[3].close()
	for _, l := range strangers {
		l.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := l.c.Read(make([]byte, 1)); err == nil {
			t.Error("a stranger's connection is still open")
		}
		l.close()
	}
	raw.Close()
}

// Frames carry a descriptor that arrives as a working copy; a corrupt
// header is an error, not an allocation.
func TestLinkFrames(t *testing.T) {
	a, b := pair(t)
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("hello")
	deadline := time.Now().Add(5 * time.Second)
	if err := a.send([]byte("payload"), int(f.Fd()), deadline); err != nil {
		t.Fatal(err)
	}
	data, fd, err := b.recv(deadline)
	if err != nil || string(data) != "payload" || fd < 0 {
		t.Fatalf("recv: %q, fd %d, %v", data, fd, err)
	}
	buf := make([]byte, 5)
	if n, err := syscall.Pread(fd, buf, 0); err != nil || string(buf[:n]) != "hello" {
		t.Errorf("the passed descriptor reads %q, %v", buf[:n], err)
	}
	syscall.Close(fd)
	f.Close()
	if err := a.send(nil, -1, deadline); err != nil {
		t.Fatal(err)
	}
	if data, fd, err := b.recv(deadline); err != nil || len(data) != 0 || fd != -1 {
		t.Errorf("empty frame: %q, %d, %v", data, fd, err)
	}
	a.c.Write([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
	if _, _, err := b.recv(deadline); err == nil || !strings.Contains(err.Error(), "corrupt stream") {
		t.Errorf("oversized frame: %v", err)
	}
	a.close()
	if _, _, err := b.recv(deadline); err == nil || !strings.Contains(err.Error(), "closed its Unix socket") {
		t.Errorf("after the peer closed: %v", err)
	}
	b.close()
}

func pair(t *testing.T) (*link, *link) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(fd, peer int) *link {
		f := os.NewFile(uintptr(fd), "link")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return &link{peer: peer, c: c.(*net.UnixConn)}
	}
	return mk(fds[0], 1), mk(fds[1], 0)
}

// Whatever a peer writes, recv returns frames or an error: no panic, no
// allocation beyond the frame limit, no descriptor left open.
func FuzzLinkRecv(f *testing.F) {
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0, 'p', 'a', 'y', 'l', 'o', 'a', 'd'})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := pair(t)
		defer b.close()
		go func() {
			a.c.Write(data)
			a.close()
		}()
		deadline := time.Now().Add(5 * time.Second)
		for range 64 {
			got, fd, err := b.recv(deadline)
			if err != nil {
				return
			}
			if fd >= 0 {
				t.Fatalf("a descriptor from plain bytes: %d", fd)
			}
			if len(got) > maxFrame {
				t.Fatalf("frame of %d bytes", len(got))
			}
		}
	})
}
