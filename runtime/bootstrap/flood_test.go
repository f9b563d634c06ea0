//go:build linux

package bootstrap

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// floodVar makes TestFlood's child process run the flood itself, under
// a descriptor limit low enough to reach.
const floodVar = "BOOTSTRAP_TEST_FLOOD"

// Connections from strangers run rank 0's process out of descriptors, so
// the root's Accept fails (EMFILE); once they go, a correct rank is still
// admitted and the job runs. The flood runs in a child process whose
// RLIMIT_NOFILE is lowered to 256, so the test's own process keeps its
// descriptors.
func TestFlood(t *testing.T) {
	if os.Getenv(floodVar) == "1" {
		flood(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFlood$", "-test.v")
	cmd.Env = append(os.Environ(), floodVar+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFlood") {
		t.Fatalf("flood child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "flood_test.go") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func flood(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	id := loopbackID(t)
	root := make(chan error, 1)
	go func() { root <- connectExercise(Config{Rank: 0, World: 2, ID: id, Timeout: 30 * time.Second}) }()
	waitListening(t, id.Addr)
	before := acceptRetries.Load()
	var conns []net.Conn
	dialErr := error(nil)
	// Dial until this process has no descriptor left; then free one at a
	// time and dial again, so connections wait in the backlog while the
	// root's Accept has no descriptor to take them with.
	for deadline := time.Now().Add(10 * time.Second); acceptRetries.Load() == before && time.Now().Before(deadline); {
		c, err := net.DialTimeout("tcp", id.Addr, time.Second)
		if err == nil {
			conns = append(conns, c)
			continue
		}
		dialErr = err
		if len(conns) > 0 && errors.Is(err, syscall.EMFILE) {
			conns[0].Close()
			conns = conns[1:]
		}
		time.Sleep(time.Millisecond)
	}
	retries := acceptRetries.Load() - before
	t.Logf("flood: %d connections open, last dial error %v, %d failed Accepts survived", len(conns), dialErr, retries)
	if retries == 0 {
		t.Fatal("the flood never made the root's Accept fail: the test proves nothing")
	}
	for _, c := range conns {
		c.Close()
	}
	start := time.Now()
	if err := connectExercise(Config{Rank: 1, World: 2, ID: id, Timeout: 30 * time.Second}); err != nil {
		t.Fatalf("rank 1 after the flood: %v", err)
	}
	if err := <-root; err != nil {
		t.Fatalf("rank 0 after the flood: %v", err)
	}
	t.Logf("rank 1 admitted and the job ran %v after the flood ended", time.Since(start).Round(time.Millisecond))
}

// Strangers beyond the caps (in total, per source host) are closed
// without a challenge; those within them are dropped when their
// handshake time runs out; a correct rank from the same host then gets in.
func TestStrangerCaps(t *testing.T) {
	defer func(a, b int, d time.Duration) { maxStrangers, maxStrangersPerHost, handshakeLimitTime = a, b, d }(maxStrangers, maxStrangersPerHost, handshakeLimitTime)
	maxStrangers, maxStrangersPerHost, handshakeLimitTime = 8, 4, 500*time.Millisecond
	id := loopbackID(t)
	root := make(chan error, 1)
	go func() { root <- connectExercise(Config{Rank: 0, World: 2, ID: id, Timeout: 10 * time.Second}) }()
	waitListening(t, id.Addr)
	time.Sleep(50 * time.Millisecond) // waitListening's probe has left
	challenged, dropped := 0, 0
	var silent []net.Conn
	for i := 0; i < 12; i++ {
		c, err := net.Dial("tcp", id.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := readMsg(c, handshakeLimit); err == nil {
			challenged++
			silent = append(silent, c)
		} else if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			dropped++
		} else {
			t.Fatalf("stranger %d: %v", i, err)
		}
	}
	if challenged != 4 || dropped != 8 {
		t.Errorf("%d strangers challenged, %d dropped at once; want 4 and 8 (per-host cap 4)", challenged, dropped)
	}
	start := time.Now()
	for _, c := range silent {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := readMsg(c, handshakeLimit); err == nil {
			t.Errorf("a silent stranger got a second frame")
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("silent strangers held their slots %v (handshake limit 500ms)", d)
	}
	if err := connectExercise(Config{Rank: 1, World: 2, ID: id, Timeout: 10 * time.Second}); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if err := <-root; err != nil {
		t.Fatalf("rank 0: %v", err)
	}
}

// MSCCL_BOOTSTRAP_ADDR=127.0.0.1:P keeps the root on loopback: another
// address of this host does not reach it.
func TestListensExactly(t *testing.T) {
	other := localAddress()
	if other == "127.0.0.1" {
		t.Skip("this host has no address but loopback")
	}
	port := freePort(t)
	cfg, err := fromEnv(envOf("MSCCL_RANK=0", "MSCCL_WORLD_SIZE=2", "MSCCL_BOOTSTRAP_ADDR=127.0.0.1:"+port, "MSCCL_SECRET=s", "MSCCL_NODE=n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 2 * time.Second
	root := make(chan error, 1)
	go func() { root <- connectExercise(cfg) }()
	waitListening(t, "127.0.0.1:"+port)
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(other, port), time.Second); err == nil {
		c.Close()
		t.Errorf("the root configured on 127.0.0.1 answers on %s", other)
	}
	<-root
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// Every field of the hello is under its MAC: a hello whose time left was
// changed after signing is refused like a wrong secret.
func TestHelloTimeLeftSigned(t *testing.T) {
	id, root := startRoot(t, 2, time.Second)
	c, err := net.Dial("tcp", id.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	ch, err := readMsg(c, handshakeLimit)
	if err != nil {
		t.Fatal(err)
	}
	h := &msg{kind: kHello, rank: 1, world: 2, ms: 60000, nonce: nonce(), node: "x"}
	h.mac = helloMAC(id.Secret, ch.nonce, h)
	h.ms = 1 // what an attacker would shorten the connect phase to
	c.Write(encode(h))
	if r, err := readMsg(c, handshakeLimit); err != nil || r.kind != kReject || !strings.Contains(r.text, "authentication failed") {
		t.Errorf("tampered hello: %+v, %v; want refused", r, err)
	}
	<-root
}
