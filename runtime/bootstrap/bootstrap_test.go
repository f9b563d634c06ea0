package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/par"
)

// group connects n ranks inside this process (each over its own TCP
// connection, exactly as separate processes would) and runs f on each.
//
// The unique ID names a port that was free when it was made; another
// process (CI runs packages in parallel) may bind it before rank 0 does.
// Then no rank gets past Connect, f never ran, and the job is tried again
// on a new ID, as a launcher would.
func group(t *testing.T, n int, timeout time.Duration, f func(b *Bootstrap) error) []error {
	t.Helper()
	for attempt := 1; ; attempt++ {
		id := loopbackID(t)
		var rootInUse atomic.Bool
		errs := par.Each(n, func(r int) error {
			cfg := Config{Rank: r, World: n, LocalRank: r, LocalWorld: n, Node: fmt.Sprintf("node%d", r%2), ID: id, Timeout: timeout}
			b, err := Connect(context.Background(), cfg)
			if err != nil {
				if r == 0 && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
					rootInUse.Store(true)
				}
				return err
			}
			err = f(b)
			if cerr := b.Close(); err == nil {
				err = cerr
			}
			return err
		})
		if !rootInUse.Load() || attempt == 3 {
			return errs
		}
		t.Logf("attempt %d: rank 0's port was taken (%v); again on a new ID", attempt, errs[0])
	}
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// exercise is what every healthy rank does in the in-process and the
// multi-process tests: all-gather, barrier, ordered send/recv.
func exercise(ctx context.Context, b *Bootstrap) error {
	n, r := b.Size(), b.Rank()
	for round := 0; round < 3; round++ {
		blob := bytes.Repeat([]byte{byte(r), byte(round)}, r+1)
		all, err := b.AllGather(ctx, blob)
		if err != nil {
			return err
		}
		if len(all) != n {
			return fmt.Errorf("all-gather: %d blobs, want %d", len(all), n)
		}
		for p, got := range all {
			if want := bytes.Repeat([]byte{byte(p), byte(round)}, p+1); !bytes.Equal(got, want) {
				return fmt.Errorf("all-gather round %d: blob of rank %d is %v, want %v", round, p, got, want)
			}
		}
		if err := b.Barrier(ctx); err != nil {
			return err
		}
	}
	// Ordered send/recv: 20 messages on each of two tags to every peer
	// (self included), received tag by tag in reverse send order of tags.
	const msgs = 20
	for p := 0; p < n; p++ {
		for i := 0; i < msgs; i++ {
			for tag := 0; tag < 2; tag++ {
				if err := b.Send(ctx, p, tag, []byte(fmt.Sprintf("%d->%d tag %d #%d", r, p, tag, i))); err != nil {
					return err
				}
			}
		}
	}
	for p := 0; p < n; p++ {
		for tag := 1; tag >= 0; tag-- {
			for i := 0; i < msgs; i++ {
				got, err := b.Recv(ctx, p, tag)
				if err != nil {
					return err
				}
				if want := fmt.Sprintf("%d->%d tag %d #%d", p, r, tag, i); string(got) != want {
					return fmt.Errorf("recv from %d tag %d: got %q, want %q", p, tag, got, want)
				}
			}
		}
	}
	return b.Barrier(ctx)
}

// noLeaks checks, when the test ends, that every reader, writer, timer
// and accept loop it started has ended (for tests that run alone).
func noLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		for start := time.Now(); runtime.NumGoroutine() > base; time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 2*time.Second {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines left behind, was %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
				return
			}
		}
	})
}

func TestInProcess(t *testing.T) {
	noLeaks(t)
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			errs := group(t, n, 10*time.Second, func(b *Bootstrap) error {
				want := make([]string, n)
				for i := range want {
					want[i] = fmt.Sprintf("node%d", i%2)
				}
				if got := b.Nodes(); !slices.Equal(got, want) {
					return fmt.Errorf("nodes %v, want %v", got, want)
				}
				return exercise(context.Background(), b)
			})
			noErrors(t, errs)
		})
	}
}

// A rank that never calls the collective is named, on every rank, within
// the timeout.
func TestCollectiveTimeoutNamesMissing(t *testing.T) {
	t.Parallel()
	const n = 4
	timeout := time.Second
	start := time.Now()
	errs := group(t, n, timeout, func(b *Bootstrap) error {
		if b.Rank() == 2 {
			time.Sleep(2 * timeout)
			return nil
		}
		_, err := b.AllGather(context.Background(), []byte("x"))
		select {
		case <-b.Failed():
			if b.Err() != err {
				return fmt.Errorf("Err() = %v, the collective returned %v", b.Err(), err)
			}
		default:
			return fmt.Errorf("Failed() not closed after %v", err)
		}
		return err
	})
	if el := time.Since(start); el > 4*timeout+time.Second {
		t.Errorf("took %v", el)
	}
	for r, err := range errs {
		if r == 2 {
			continue
		}
		var te *TimeoutError
		if !errors.As(err, &te) || !slices.Equal(te.Ranks, []int{2}) {
			t.Errorf("rank %d: %v, want a timeout naming rank 2", r, err)
		}
	}
}

func TestRecvTimeoutNamesPeer(t *testing.T) {
	t.Parallel()
	errs := group(t, 2, time.Second, func(b *Bootstrap) error {
		if b.Rank() == 1 {
			time.Sleep(2 * time.Second)
			return nil
		}
		_, err := b.Recv(context.Background(), 1, 7)
		var te *TimeoutError
		if !errors.As(err, &te) || !slices.Equal(te.Ranks, []int{1}) {
			return fmt.Errorf("recv: %v, want a timeout naming rank 1", err)
		}
		if b.Err() != nil {
			return fmt.Errorf("a recv timeout broke the bootstrap: %v", b.Err())
		}
		return nil
	})
	noErrors(t, errs)
}

func TestConnectTimeoutNamesMissing(t *testing.T) {
	t.Parallel()
	id := loopbackID(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		if r == 1 || r == 3 {
			continue // never started
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := Connect(context.Background(), Config{Rank: r, World: n, ID: id, Timeout: 500 * time.Millisecond})
			if err == nil {
				b.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for _, r := range []int{0, 2} {
		var te *TimeoutError
		if !errors.As(errs[r], &te) || !slices.Equal(te.Ranks, []int{1, 3}) {
			t.Errorf("rank %d: %v, want a timeout naming ranks 1, 3", r, errs[r])
		}
	}
}

// A stranger without the secret is refused and the job completes.
func TestStrangerRefused(t *testing.T) {
	noLeaks(t)
	id := loopbackID(t)
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	connect := func(r int) {
		defer wg.Done()
		errs[r] = connectExercise(Config{Rank: r, World: n, ID: id, Timeout: 5 * time.Second})
	}
	wg.Add(2)
	go connect(0)
	go connect(1)
	waitListening(t, id.Addr)
	wrong := id
	wrong.Secret[0] ^= 1
	_, err := Connect(context.Background(), Config{Rank: 2, World: n, ID: wrong, Timeout: 2 * time.Second})
	if err == nil || !errors.Is(err, errRefused) {
		t.Errorf("wrong secret: %v, want refused", err)
	}
	// Garbage and silence from strangers change nothing either.
	if c, err := net.Dial("tcp", id.Addr); err == nil {
		c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		defer c.Close()
	}
	if c, err := net.Dial("tcp", id.Addr); err == nil {
		defer c.Close()
	}
	wg.Add(1)
	go connect(2)
	wg.Wait()
	noErrors(t, errs)
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}

// connectExercise joins a job as cfg says, runs exercise and leaves.
func connectExercise(cfg Config) error {
	b, err := Connect(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	return exercise(context.Background(), b)
}

// loopbackID is a fresh job id on loopback.
func loopbackID(t testing.TB) UniqueID {
	t.Helper()
	id, err := NewUniqueID("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// startRoot starts rank 0 of an n-rank job on loopback in the background
// and waits until it listens; its Connect's error arrives on the channel.
func startRoot(t *testing.T, n int, timeout time.Duration) (UniqueID, <-chan error) {
	t.Helper()
	id := loopbackID(t)
	root := make(chan error, 1)
	go func() {
		b, err := Connect(context.Background(), Config{Rank: 0, World: n, ID: id, Timeout: timeout})
		if err == nil {
			b.Close()
		}
		root <- err
	}()
	waitListening(t, id.Addr)
	return id, root
}

// hello joins the job of id by hand as cfg says (on node "x"), its
// connect timeout ms milliseconds, and returns the connection the root
// accepted.
func hello(id UniqueID, cfg Config, ms uint64) (net.Conn, error) {
	c, err := net.Dial("tcp", id.Addr)
	if err != nil {
		return nil, err
	}
	cfg.ID, cfg.Node = id, "x"
	if err := clientHello(c, &cfg, ms, time.Now().Add(5*time.Second)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// MSCCL_UNIQUE_ID_FILE: rank 0 makes the id and writes it; the others
// wait for it, and are not fooled by a stale file from an earlier job.
func TestIDFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "id")
	stale := loopbackID(t)
	if err := writeIDFile(path, stale); err != nil {
		t.Fatal(err)
	}
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := n - 1; r >= 0; r-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = connectExercise(Config{Rank: r, World: n, IDFile: path, Timeout: 5 * time.Second})
		}()
		if r == n-1 {
			time.Sleep(300 * time.Millisecond) // the last rank reads the stale file first
		}
	}
	wg.Wait()
	noErrors(t, errs)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank 0 left its id file behind: %v", err)
	}
}

// A rank that joins and dies before the job has formed fails the others
// at once, naming it, and a rank arriving later hears the same verdict.
func TestDeadDuringConnect(t *testing.T) {
	t.Parallel()
	const n = 3
	id, root := startRoot(t, n, 10*time.Second)
	c, err := hello(id, Config{Rank: 1, World: n}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // rank 1 dies
	start := time.Now()
	var pe *PeerError
	if err := <-root; !errors.As(err, &pe) || pe.Rank != 1 {
		t.Errorf("rank 0: %v, want rank 1 named as gone", err)
	}
	_, err = Connect(context.Background(), Config{Rank: 2, World: n, ID: id, Timeout: 10 * time.Second})
	if !errors.As(err, &pe) || pe.Rank != 1 {
		t.Errorf("late rank 2: %v, want rank 1 named as gone", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v", el)
	}
}

// Close: a Recv from a rank that closed fails naming it (after what it
// sent is delivered), and a collective that needs it fails the same way.
func TestClosedPeer(t *testing.T) {
	noLeaks(t)
	errs := group(t, 3, 5*time.Second, func(b *Bootstrap) error {
		ctx := context.Background()
		if b.Rank() == 2 {
			return b.Send(ctx, 0, 1, []byte("last words"))
		}
		if b.Rank() == 1 {
			return nil
		}
		got, err := b.Recv(ctx, 2, 1)
		if err != nil || string(got) != "last words" {
			return fmt.Errorf("recv: %q, %v", got, err)
		}
		var pe *PeerError
		if _, err := b.Recv(ctx, 2, 1); !errors.As(err, &pe) || pe.Rank != 2 || !pe.Closed {
			return fmt.Errorf("recv after close: %v, want rank 2 closed", err)
		}
		if err := b.Barrier(ctx); !errors.As(err, &pe) || !pe.Closed {
			return fmt.Errorf("barrier after close: %v, want a closed rank named", err)
		}
		return nil
	})
	noErrors(t, errs)
}

// A rank that proves the secret but cannot be right (a rank taken twice,
// another world size) is refused with a reason, and the job fails at once
// with that reason on every rank, not later as "rank 2 did not arrive".
// A connection without the secret cannot end the job (anyone could), but
// the connect timeout's verdict quotes why it was refused.
func TestAdmission(t *testing.T) {
	t.Parallel() // rank 0 keeps its failed root until the connect deadline
	const n = 3
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Rank: 1, World: n}, "rank 1 joined twice"},
		{Config{Rank: 2, World: 4}, "rank 2 (from 127.0.0.1) says the world size is 4, rank 0 says 3"},
	} {
		start := time.Now()
		id, root := startRoot(t, n, 20*time.Second)
		one, err := hello(id, Config{Rank: 1, World: n}, 20000)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := hello(id, tc.cfg, 20000); err == nil || !errors.Is(err, errRefused) || !strings.Contains(err.Error(), tc.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%+v: %v, want refused: %q", tc.cfg, err, tc.want)
		}
		var pr *ProtocolError
		if err := <-root; !errors.As(err, &pr) || pr.Rank != tc.cfg.Rank || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rank 0: %v, want rank %d's refusal %q", err, tc.cfg.Rank, tc.want)
		}
		one.SetReadDeadline(time.Now().Add(5 * time.Second))
		if m, err := readMsg(one, frameLimit); err != nil || m.kind != kAbort || !strings.Contains(abortErr(m).Error(), tc.want) {
			t.Errorf("rank 1 heard %+v, %v; want the abort quoting %q", m, err, tc.want)
		}
		one.Close()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q took %v to reach every rank", tc.want, d)
		}
	}
	id, root := startRoot(t, n, time.Second)
	wrong := id
	wrong.Secret[0] ^= 1
	if c, err := hello(wrong, Config{Rank: 2, World: n}, 5000); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		if c != nil {
			c.Close()
		}
		t.Errorf("wrong secret: %v, want refused", err)
	}
	var te *TimeoutError
	if err := <-root; !errors.As(err, &te) || !strings.Contains(err.Error(), "claiming rank 2 was refused: it does not hold this job's secret") {
		t.Errorf("rank 0: %v, want a timeout quoting the refusal", err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Rank: 2, World: 3, ID: id, Node: strings.Repeat("n", maxNode+1)}, "node identity of"},
		{Config{Rank: 3, World: 3, ID: id}, "want 0 <= rank < world"},
		{Config{Rank: 0, World: 0, ID: id}, "want 0 <= rank < world"},
		{Config{Rank: 1, World: 2}, "no root address"},
	} {
		if _, err := Connect(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

// Cancelling a collective returns at once; the bootstrap is then unusable
// for further collectives (its numbering is out of step), and says so.
func TestCancelledCollective(t *testing.T) {
	errs := group(t, 2, 5*time.Second, func(b *Bootstrap) error {
		if b.Rank() == 1 {
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		if _, err := b.AllGather(ctx, nil); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
			return fmt.Errorf("cancelled all-gather: %v after %v", err, time.Since(start))
		}
		if err := b.Barrier(context.Background()); err == nil || !strings.Contains(err.Error(), "cancelled") {
			return fmt.Errorf("barrier after a cancelled all-gather: %v", err)
		}
		return nil
	})
	noErrors(t, errs)
}

// Rank 0 giving up (its context cancelled) is reported to the ranks that
// joined as rank 0 having left, not as an error that names nobody.
func TestRootGivesUp(t *testing.T) {
	t.Parallel()
	id := loopbackID(t)
	ctx, cancel := context.WithCancel(context.Background())
	root := make(chan error, 1)
	go func() {
		_, err := Connect(ctx, Config{Rank: 0, World: 3, ID: id, Timeout: 10 * time.Second})
		root <- err
	}()
	one := make(chan error, 1)
	go func() {
		_, err := Connect(context.Background(), Config{Rank: 1, World: 3, ID: id, Timeout: 10 * time.Second})
		one <- err
	}()
	time.Sleep(300 * time.Millisecond) // both have joined; rank 2 never comes
	cancel()
	if err := <-root; !errors.Is(err, context.Canceled) {
		t.Errorf("rank 0: %v, want its own cancellation", err)
	}
	// Rank 1 hears either rank 0's goodbye or the lost connection first
	// (a race on a loaded machine: both name rank 0 as gone).
	var pe *PeerError
	if err := <-one; !errors.As(err, &pe) || pe.Rank != 0 {
		t.Errorf("rank 1: %v, want rank 0 named as gone", err)
	}
}
