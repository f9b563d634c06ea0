package bootstrap

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchGroup connects n in-process ranks and runs f on each with b.N.
func benchGroup(b *testing.B, n int, f func(bs *Bootstrap, iters int) error) {
	id := loopbackID(b)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for r := 0; r < n; r++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			bs, err := Connect(context.Background(), Config{Rank: r, World: n, ID: id, Node: "n", Timeout: 30 * time.Second})
			ready.Done()
			if err != nil {
				errs[r] = err
				return
			}
			defer bs.Close()
			<-start
			errs[r] = f(bs, b.N)
		}()
	}
	ready.Wait()
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// BenchmarkAllGather: one 64-byte blob per rank (a handle's size), all
// ranks in this process over loopback; µs per all-gather.
func BenchmarkAllGather(b *testing.B) {
	for _, n := range []int{2, 8, 16} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchGroup(b, n, func(bs *Bootstrap, iters int) error {
				blob := make([]byte, 64)
				for i := 0; i < iters; i++ {
					if _, err := bs.AllGather(context.Background(), blob); err != nil {
						return err
					}
				}
				return nil
			})
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/allgather")
		})
	}
}

// BenchmarkSendRecv: a ping-pong of 64-byte messages between two ranks
// through the root; µs per round trip.
func BenchmarkSendRecv(b *testing.B) {
	benchGroup(b, 2, func(bs *Bootstrap, iters int) error {
		ctx, peer, msg := context.Background(), 1-bs.Rank(), make([]byte, 64)
		for i := 0; i < iters; i++ {
			if bs.Rank() == 0 {
				if err := bs.Send(ctx, peer, 0, msg); err != nil {
					return err
				}
			}
			if _, err := bs.Recv(ctx, peer, 0); err != nil {
				return err
			}
			if bs.Rank() == 1 {
				if err := bs.Send(ctx, peer, 0, msg); err != nil {
					return err
				}
			}
		}
		return nil
	})
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/roundtrip")
}
