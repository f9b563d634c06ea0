package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/msccl-go/msccl-go"
)

// benchCount is the benchmark's message: 256 f32, 1 KiB.
const benchCount = 256

// BenchmarkHostTimeAllReduce compares the host time of one allreduce of
// 1 KiB f32 through the NCCL API (testdata/hostbench.c against
// libmsccl_nccl.so: the cgo call, the handle lookup, the argument checks
// and conversion, group state) with the same loop through the Go API
// (msccl.RankComm.AllReduce, in this test binary run again as each rank),
// on the cpu device, world 1, 2 and 4 processes. Each round runs the C
// job then the Go job, b.N calls per rank each; the figures are the
// medians over the rounds of the ranks' mean µs per call, so both sides
// see the same machine at nearly the same time. ns/op includes the
// processes' start and rendezvous: read the µs/call metrics. Run it with
// a fixed count, for example
//
//	go test ./nccl -run '^$' -bench HostTime -benchtime 20000x
func BenchmarkHostTimeAllReduce(b *testing.B) {
	_, bin := buildC(b, "testdata/hostbench.c")
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, world := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("world=%d", world), func(b *testing.B) {
			const rounds = 3
			var nc, gc []float64
			for range rounds {
				nc = append(nc, runBenchJob(b, world, func(ctx context.Context, r int, idFile string) *exec.Cmd {
					return exec.CommandContext(ctx, bin, strconv.Itoa(r), strconv.Itoa(world), idFile, strconv.Itoa(b.N), strconv.Itoa(benchCount))
				}))
				gc = append(gc, runBenchJob(b, world, func(ctx context.Context, r int, idFile string) *exec.Cmd {
					cmd := exec.CommandContext(ctx, self, "-test.run=^$")
					cmd.Env = append(os.Environ(), fmt.Sprintf("MSCCL_HOSTBENCH_GO=%d,%d,%s,%d", r, world, idFile, b.N))
					return cmd
				}))
			}
			n, g := median(nc), median(gc)
			b.ReportMetric(n, "nccl-µs/call")
			b.ReportMetric(g, "go-µs/call")
			b.ReportMetric(n-g, "extra-µs/call")
		})
	}
}

var usPerCall = regexp.MustCompile(`rank \d+: (?:nccl|go) ([0-9.]+) us/call`)

// runBenchJob runs world processes made by cmd on the cpu device and
// returns the mean over the ranks of their µs per call.
func runBenchJob(b *testing.B, world int, cmd func(ctx context.Context, rank int, idFile string) *exec.Cmd) float64 {
	outs := runJob(b, world, cmd)
	sum := 0.0
	for r := range world {
		m := usPerCall.FindSubmatch(outs[r])
		if m == nil {
			b.Fatalf("rank %d printed no µs per call:\n%s", r, outs[r])
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		sum += v
	}
	return sum / float64(world)
}

// runJob runs world processes made by cmd on the cpu device and returns
// what each printed; a rank that fails fails t.
func runJob(t testing.TB, world int, cmd func(ctx context.Context, rank int, idFile string) *exec.Cmd) [][]byte {
	idFile := filepath.Join(t.TempDir(), "id")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, world)
	outs := make([][]byte, world)
	errs := make([]error, world)
	done := make(chan int, world)
	for r := range world {
		c := cmd(ctx, r, idFile)
		if c.Env == nil {
			c.Env = os.Environ()
		}
		c.Env = append(c.Env, "MSCCL_DEVICE=cpu", "MSCCL_NCCL_FALLBACK=0")
		cmds[r] = c
		go func() {
			outs[r], errs[r] = c.CombinedOutput()
			done <- r
		}()
	}
	for range world {
		<-done
	}
	for r := range world {
		if errs[r] != nil {
			t.Fatalf("rank %d of %s: %v\n%s", r, cmds[r].Path, errs[r], outs[r])
		}
	}
	return outs
}

var sleeps = regexp.MustCompile(`rank (\d+): (\d+) voluntary context switches in (\d+) calls`)

// A C thread that calls ncclAllReduce of 1 KiB on the cpu device is not
// put to sleep to wait for its peers: each sleep of the locked goroutine
// that runs a call from C is a hand-off between OS threads, which used
// to cost more than the whole call (testdata/hostbench.c counts the
// thread's voluntary context switches over its loop). A few are allowed
// for a peer kept off its core longer than the waits' yielding phase.
func TestCThreadKeepsRunning(t *testing.T) {
	_, bin := buildC(t, "testdata/hostbench.c")
	const world, calls = 2, 2000
	outs := runJob(t, world, func(ctx context.Context, r int, idFile string) *exec.Cmd {
		return exec.CommandContext(ctx, bin, strconv.Itoa(r), strconv.Itoa(world), idFile, strconv.Itoa(calls), strconv.Itoa(benchCount))
	})
	for r, out := range outs {
		m := sleeps.FindSubmatch(out)
		if m == nil {
			t.Fatalf("rank %d printed no count of context switches:\n%s", r, out)
		}
		n, _ := strconv.Atoi(string(m[2]))
		t.Logf("rank %d: %d voluntary context switches in %d calls", r, n, calls)
		if n > calls/4 {
			t.Errorf("rank %d: the C thread slept %d times in %d calls of 1 KiB", r, n, calls)
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// goBenchRank is the Go side of BenchmarkHostTimeAllReduce, run by this
// test binary when MSCCL_HOSTBENCH_GO is "RANK,WORLD,IDFILE,ITERS": the
// loop of testdata/hostbench.c through msccl.RankComm.AllReduce.
func goBenchRank(spec string) error {
	f := strings.Split(spec, ",")
	if len(f) != 4 {
		return fmt.Errorf("MSCCL_HOSTBENCH_GO=%q: want RANK,WORLD,IDFILE,ITERS", spec)
	}
	rank, err1 := strconv.Atoi(f[0])
	world, err2 := strconv.Atoi(f[1])
	idFile := f[2]
	iters, err3 := strconv.Atoi(f[3])
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("MSCCL_HOSTBENCH_GO=%q: %w", spec, err)
	}
	var id string
	if rank == 0 {
		var err error
		if id, err = msccl.NewUniqueID(); err != nil {
			return err
		}
		if err := os.WriteFile(idFile+".tmp", []byte(id), 0o600); err != nil {
			return err
		}
		if err := os.Rename(idFile+".tmp", idFile); err != nil {
			return err
		}
	} else {
		for t := 0; ; t++ {
			b, err := os.ReadFile(idFile)
			if err == nil {
				id = string(b)
				break
			}
			if t == 600 {
				return fmt.Errorf("no unique id in %s after 30 s", idFile)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ctx := context.Background()
	rc, err := msccl.JoinComm(ctx, id, rank, world, msccl.CommOptions{Device: "cpu"})
	if err != nil {
		return err
	}
	in, out := make([]byte, 4*benchCount), make([]byte, 4*benchCount)
	for i := 0; i < len(in); i += 4 {
		binary.LittleEndian.PutUint32(in[i:], math.Float32bits(float32(rank+1)))
	}
	call := func() error {
		return rc.AllReduce(ctx, msccl.HostMem(in), msccl.HostMem(out), msccl.F32, msccl.Sum)
	}
	for range iters/10 + 10 {
		if err := call(); err != nil {
			return err
		}
	}
	t0 := time.Now()
	for range iters {
		if err := call(); err != nil {
			return err
		}
	}
	us := float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(iters)
	want := float32(world * (world + 1) / 2)
	for i := 0; i < len(out); i += 4 {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(out[i:])); got != want {
			return fmt.Errorf("element %d is %g, want %g", i/4, got, want)
		}
	}
	if err := rc.Close(); err != nil {
		return err
	}
	fmt.Printf("rank %d: go %.3f us/call\n", rank, us)
	return nil
}

// BenchmarkAllReduceOneProcess splits the extra host time of the NCCL
// API without the cgo transition: one rank in this process, the same
// 1 KiB f32 allreduce through RankComm.AllReduce and through the Go side
// of ncclAllReduce (handle lookup, argument checks and conversion, group
// state). What BenchmarkHostTimeAllReduce's world=1 shows beyond this is
// the C-to-Go call itself.
func BenchmarkAllReduceOneProcess(b *testing.B) {
	b.Setenv("MSCCL_DEVICE", "cpu")
	id, err := msccl.NewUniqueID()
	if err != nil {
		b.Fatal(err)
	}
	c, err := initRank(id, 1, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	h := handleOf(c)
	defer destroy(h, c)
	in, out := make([]byte, 4*benchCount), make([]byte, 4*benchCount)
	ctx := context.Background()
	b.Run("go", func(b *testing.B) {
		for range b.N {
			if err := c.rc.AllReduce(ctx, msccl.HostMem(in), msccl.HostMem(out), msccl.F32, msccl.Sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nccl", func(b *testing.B) {
		for range b.N {
			if rc := ncclAllReduce(unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0]), benchCount, 7 /* ncclFloat32 */, opSum, h, nil); rc != ncclSuccess {
				b.Fatalf("ncclAllReduce: %d", rc)
			}
		}
	})
}
