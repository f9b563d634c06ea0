package bootstrap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// UniqueID names one rendezvous: the root's TCP address and a random
// 128-bit secret. Rank 0 listens on Addr; every rank must present proof of
// Secret (an HMAC over fresh nonces; the secret itself never travels).
type UniqueID struct {
	Addr   string
	Secret [16]byte
}

const idPrefix = "msccl1:"

// NewUniqueID picks a free TCP port on listenHost ("" = a routable
// address of this host, loopback when it has none) and a random secret.
// The port is probed and released: rank 0 binds it again in Connect, so
// the ID must be used on the host that runs rank 0. A launcher in the same
// process avoids the short window in which another program could take the
// port by passing the listener itself (see Spawn).
func NewUniqueID(listenHost string) (UniqueID, error) {
	ln, err := listenFree(listenHost)
	if err != nil {
		return UniqueID{}, err
	}
	id := UniqueID{Addr: ln.Addr().String()}
	ln.Close()
	if _, err := rand.Read(id.Secret[:]); err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: random secret: %w", err)
	}
	return id, nil
}

// listenFree opens a listener on a free port of host.
func listenFree(host string) (*net.TCPListener, error) {
	if host == "" {
		host = localAddress()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("bootstrap: no free port on %q: %w", host, err)
	}
	return ln.(*net.TCPListener), nil
}

// localAddress returns the first IPv4 address of an interface that is up
// and not loopback: the one other hosts most likely reach us on. A host
// with none gets loopback, which is right for a single-host job.
func localAddress() string {
	ifs, err := net.Interfaces()
	if err == nil {
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
					return ipn.IP.String()
				}
			}
		}
	}
	return "127.0.0.1"
}

// String prints the ID as "msccl1:HOST:PORT:HEXSECRET" (an IPv6 host in
// brackets); ParseUniqueID reverses it. The string is a credential: pass
// it through the environment or a file readable only by the job's user.
func (u UniqueID) String() string {
	return idPrefix + u.Addr + ":" + hex.EncodeToString(u.Secret[:])
}

// ParseUniqueID parses the form String prints. Its errors never quote
// the input, not even the address part (a misplaced colon would put the
// secret there): the id is a credential, and errors end up in logs.
func ParseUniqueID(s string) (UniqueID, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, idPrefix)
	if !ok {
		return UniqueID{}, fmt.Errorf("bootstrap: the unique id (%d characters, not shown: it holds the secret) does not start with %q", len(s), idPrefix)
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return UniqueID{}, fmt.Errorf("bootstrap: the unique id (%d characters, not shown) has no secret: want %sHOST:PORT:SECRET", len(s), idPrefix)
	}
	var id UniqueID
	id.Addr = rest[:i]
	sec, err := hex.DecodeString(rest[i+1:])
	if err != nil || len(sec) != len(id.Secret) {
		return UniqueID{}, fmt.Errorf("bootstrap: the unique id (not shown): the secret after the last ':' must be %d hex digits, it has %d characters", 2*len(id.Secret), len(rest)-i-1)
	}
	copy(id.Secret[:], sec)
	if _, _, err := splitPort(id.Addr); err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: the unique id (not shown): its address is not HOST:PORT with a port in 1..65535")
	}
	return id, nil
}

// splitPort checks that addr is HOST:PORT with a numeric port.
func splitPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	var port int
	if _, err := fmt.Sscanf(p, "%d", &port); err != nil || port <= 0 || port > 65535 || fmt.Sprint(port) != p {
		return "", 0, fmt.Errorf("address %q: port %q is not a number in 1..65535", addr, p)
	}
	return h, port, nil
}

// clip shortens user input quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// secretFrom hashes any string into a secret, so users can set
// MSCCL_SECRET to a passphrase of any length.
func secretFrom(domain string, parts ...string) [16]byte {
	h := sha256.New()
	h.Write([]byte(domain))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var s [16]byte
	copy(s[:], h.Sum(nil))
	return s
}

// writeIDFile publishes id at path atomically (write a temporary file
// next to it, then rename), readable only by the owner.
func writeIDFile(path string, id UniqueID) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".msccl-id-*")
	if err != nil {
		return fmt.Errorf("bootstrap: unique id file: %w", err)
	}
	_, err = tmp.WriteString(id.String() + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("bootstrap: unique id file %s: %w", path, err)
	}
	return nil
}

// readIDFile waits until path holds a unique id or deadline passes.
func readIDFile(path string, deadline time.Time, timeout time.Duration) (UniqueID, error) {
	var last error
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			id, perr := ParseUniqueID(string(b))
			if perr != nil {
				return UniqueID{}, fmt.Errorf("%s: %w", path, perr)
			}
			return id, nil
		}
		last = err
		if time.Now().After(deadline) {
			if last == nil || errors.Is(last, os.ErrNotExist) {
				last = errors.New("rank 0 did not write it")
			}
			return UniqueID{}, &TimeoutError{Op: "reading the unique id file " + path, Ranks: []int{0}, After: timeout, Detail: last.Error()}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
