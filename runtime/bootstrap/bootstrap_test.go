package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// group connects n ranks inside this process (each over its own TCP
// connection, exactly as separate processes would) and runs f on each.
func group(t *testing.T, n int, timeout time.Duration, f func(b *Bootstrap) error) []error {
	t.Helper()
	id, err := NewUniqueID("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Rank: r, World: n, LocalRank: r, LocalWorld: n, Node: fmt.Sprintf("node%d", r%2), ID: id, Timeout: timeout}
			b, err := Connect(context.Background(), cfg)
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = f(b)
			if cerr := b.Close(); errs[r] == nil {
				errs[r] = cerr
			}
		}()
	}
	wg.Wait()
	return errs
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

func TestInProcess(t *testing.T) {
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
	const n = 4
	timeout := 600 * time.Millisecond
	start := time.Now()
	errs := group(t, n, timeout, func(b *Bootstrap) error {
		if b.Rank() == 2 {
			time.Sleep(2 * timeout)
			return nil
		}
		_, err := b.AllGather(context.Background(), []byte("x"))
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
	errs := group(t, 2, 300*time.Millisecond, func(b *Bootstrap) error {
		if b.Rank() == 1 {
			time.Sleep(time.Second)
			return nil
		}
		_, err := b.Recv(context.Background(), 1, 7)
		var te *TimeoutError
		if !errors.As(err, &te) || !slices.Equal(te.Ranks, []int{1}) {
			return fmt.Errorf("recv: %v, want a timeout naming rank 1", err)
		}
		return nil
	})
	noErrors(t, errs)
}

func TestConnectTimeoutNamesMissing(t *testing.T) {
	id, err := NewUniqueID("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
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
	id, err := NewUniqueID("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	connect := func(r int) {
		defer wg.Done()
		b, err := Connect(context.Background(), Config{Rank: r, World: n, ID: id, Timeout: 5 * time.Second})
		if err == nil {
			err = exercise(context.Background(), b)
			b.Close()
		}
		errs[r] = err
	}
	wg.Add(2)
	go connect(0)
	go connect(1)
	waitListening(t, id.Addr)
	wrong := id
	wrong.Secret[0] ^= 1
	_, err = Connect(context.Background(), Config{Rank: 2, World: n, ID: wrong, Timeout: 2 * time.Second})
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
