package msccl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// With this variable set the test binary is one rank of a job
// (rankChild) instead of running tests: TestRankDies spawns it.
const rankRole = "MSCCL_TEST_RANK_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(rankRole); role == "probe-cuda" {
		os.Exit(probeCUDA())
	} else if role != "" {
		os.Exit(rankChild(role))
	}
	os.Exit(m.Run())
}

// probeCUDA is a child that says whether CUDA works here (exit 0) or not
// (exit 77, the reason on stderr), so that the parent of TestRankDiesCUDA
// never loads the driver: cuInit opens descriptors of its own, some of
// them later and on its own threads, which the parent's descriptor count
// took for the job's (run4: 17 before, 19 after, in the first subtest only).
func probeCUDA() int {
	if err := cuda.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 77
	}
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		fmt.Fprintf(os.Stderr, "no CUDA device (%d, %v)\n", n, err)
		return 77
	}
	return 0
}

// rankChild runs allreduce_ring four times on this rank; a rank with role
// "die" kills itself before its third collective, so its peers are left
// waiting for signals it will never send. Exit status 3: a collective
// failed (the error is on stderr).
func rankChild(role string) int {
	ctx := context.Background()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 3
	}
	device := os.Getenv(rankRole + "_DEVICE")
	if device == "" {
		device = "cpu"
	}
	rc, err := OpenComm(ctx, CommOptions{Device: device})
	if err != nil {
		return fail("open", err)
	}
	defer rc.Close()
	src, err := algorithms.Source("allreduce_ring")
	if err != nil {
		return fail("source", err)
	}
	p, _, ds := compiler.CompileSource("allreduce_ring.msccl", src, map[string]int64{"ranks": int64(rc.Size())}, compiler.Options{})
	if ds.HasErrors() {
		return fail("compile", fmt.Errorf("%s", ds.String()))
	}
	// A watchdog far longer than the test allows: the peers must hear of
	// a death from the bootstrap, not by timing out. A hang is the
	// watchdog's to find.
	watchdog := time.Minute
	if role == "hang" || os.Getenv(rankRole+"_PEER") == "hang" {
		watchdog = time.Second
	}
	if device == "cuda" {
		// A kernel ends only by itself or its watchdog; the error its
		// rank then returns names the peer the bootstrap saw die.
		watchdog = 3 * time.Second
	}
	ex, err := rc.Open(ctx, p, Options{Timeout: watchdog})
	if err != nil {
		return fail("plan", err)
	}
	defer ex.Close()
	b, err := ex.Alloc(ctx, 64<<10)
	if err != nil {
		return fail("alloc", err)
	}
	defer b.Free()
	for i := range 4 {
		if role == "die" && i == 2 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if role == "hang" && i == 2 {
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
		if err := ex.Run(ctx, b, F32, Sum); err != nil {
			return fail("run", err)
		}
	}
	return 0
}

// openFDs counts this process's descriptors; shmEntries /dev/shm's names.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	fds := map[string]string{}
	for _, e := range es {
		fds[e.Name()], _ = os.Readlink("/proc/self/fd/" + e.Name())
	}
	return fds
}

// newFDs lists the descriptors in after and not in before (or reused for
// another file), with what they are: enough to tell a socket of the job
// from a driver's device node or the Go runtime's poller.
func newFDs(before, after map[string]string) []string {
	var out []string
	for fd, target := range after {
		if old, ok := before[fd]; !ok || old != target {
			out = append(out, fd+" -> "+target)
		}
	}
	sort.Strings(out)
	return out
}

func shmEntries() int {
	es, _ := os.ReadDir("/dev/shm")
	return len(es)
}

// A rank killed mid-collective makes every other rank return an error
// naming it, promptly (the watchdog is a minute, the test allows 15 s);
// every process ends, and nothing is left in /dev/shm or open here.
func TestRankDies(t *testing.T) {
	rankDies(t, "cpu", 15*time.Second)
}

// The same on the cuda device (four processes on the machine's GPUs,
// round-robin): the peers' kernels end at their 3 s watchdog and their
// ranks return an error naming the dead one; no process, descriptor or
// IPC mapping is left (the dead rank's memory is the driver's to
// reclaim).
func TestRankDiesCUDA(t *testing.T) {
	rankDies(t, "cuda", 60*time.Second)
}

// needCUDAChild skips the test unless CUDA works, probed in a child: the
// driver loaded in this process would open descriptors of its own while
// the job runs (probeCUDA), and the tests count descriptors. The ranks
// then share the machine's GPUs round-robin.
func needCUDAChild(t *testing.T) {
	t.Helper()
	probe := exec.Command(os.Args[0], "-test.run=^$")
	probe.Env = append(os.Environ(), rankRole+"=probe-cuda")
	var why bytes.Buffer
	probe.Stderr = &why
	if err := probe.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 77 {
			t.Skipf("no CUDA: %s", strings.TrimSpace(why.String()))
		}
		t.Fatalf("probing CUDA in a child: %v: %s", err, why.String())
	}
	t.Setenv("MSCCL_CUDA_DEVICE", "round-robin")
}

// spawnsOn skips a test of a job of processes in -short mode and, on the
// cuda device, without CUDA.
func spawnsOn(t *testing.T, device string) {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if device == "cuda" {
		needCUDAChild(t)
	}
}

func rankDies(t *testing.T, device string, limit time.Duration) {
	spawnsOn(t, device)
	for _, victim := range []int{2, 0} {
		t.Run(fmt.Sprintf("rank%d", victim), func(t *testing.T) {
			fds, shm := openFDs(t), shmEntries()
			var mu sync.Mutex
			stderr := make([]bytes.Buffer, 4)
			start := time.Now()
			job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{
				N: 4, Argv: []string{""}, KeepGoing: true, Timeout: limit - 5*time.Second,
				RankEnv: func(r int) []string {
					if r == victim {
						return []string{rankRole + "=die", rankRole + "_DEVICE=" + device}
					}
					return []string{rankRole + "=run", rankRole + "_DEVICE=" + device}
				},
				Stdout: func(int) io.Writer { return io.Discard },
				Stderr: func(r int) io.Writer { return lockedWriter{&mu, &stderr[r]} },
			})
			if err != nil {
				t.Fatal(err)
			}
			st, err := job.Wait()
			took := time.Since(start)
			if err == nil {
				t.Fatal("the job succeeded with a rank killed")
			}
			mu.Lock()
			defer mu.Unlock()
			for r, s := range st {
				if r == victim {
					if s.Signal != "killed" {
						t.Errorf("rank %d: %v, want killed by SIGKILL", r, s)
					}
					continue
				}
				msg := stderr[r].String()
				if s.ExitCode != 3 || !strings.Contains(msg, fmt.Sprintf("rank %d", victim)) {
					t.Errorf("rank %d: %v, stderr %q: want exit 3 and an error naming rank %d", r, s, msg, victim)
				}
				t.Logf("rank %d: %s", r, strings.TrimSpace(msg))
			}
			if took > limit {
				t.Errorf("the job took %v to fail", took)
			}
			for _, s := range st {
				if err := syscall.Kill(s.Pid, 0); err != syscall.ESRCH {
					t.Errorf("rank %d (pid %d) still exists: %v", s.Rank, s.Pid, err)
				}
			}
			if got := openFDs(t); len(got) != len(fds) {
				t.Errorf("open descriptors: %d before, %d after; new: %s", len(fds), len(got), strings.Join(newFDs(fds, got), ", "))
			}
			if got := shmEntries(); got != shm {
				t.Errorf("/dev/shm entries: %d before, %d after", shm, got)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// frozenRe matches the watchdog's naming of rank 2 among the frozen
// (a loaded machine may starve another rank long enough to join it).
var frozenRe = regexp.MustCompile(`ranks? (\d+, )*2(, \d+)* shows? no sign of life`)

// A rank whose process stops mid-collective (SIGSTOP: alive to the
// bootstrap, silent on shared memory) is named by every other rank when
// its watchdog fires, whether or not that rank waited on it directly.
func TestRankHangs(t *testing.T) {
	rankHangs(t, "cpu", 20*time.Second)
}

// The same on the cuda device: the survivors' kernels end at their
// watchdog, and the pulses in the ranks' sync regions (device memory,
// advanced by each process) name the stopped one.
func TestRankHangsCUDA(t *testing.T) {
	rankHangs(t, "cuda", 60*time.Second)
}

func rankHangs(t *testing.T, device string, limit time.Duration) {
	spawnsOn(t, device)
	const victim = 2
	var mu sync.Mutex
	stderr := make([]bytes.Buffer, 4)
	job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{
		N: 4, Argv: []string{""}, KeepGoing: true, Timeout: limit,
		RankEnv: func(r int) []string {
			if r == victim {
				return []string{rankRole + "=hang", rankRole + "_DEVICE=" + device}
			}
			return []string{rankRole + "=run", rankRole + "_PEER=hang", rankRole + "_DEVICE=" + device}
		},
		Stdout: func(int) io.Writer { return io.Discard },
		Stderr: func(r int) io.Writer { return lockedWriter{&mu, &stderr[r]} },
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stopped rank never exits by itself: once the others have
	// reported, kill it.
	reported := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for r := range stderr {
			if r != victim && !strings.Contains(stderr[r].String(), "\n") {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(limit); !reported() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	job.Signal(victim, syscall.SIGKILL)
	st, _ := job.Wait()
	mu.Lock()
	defer mu.Unlock()
	for r, s := range st {
		if r == victim {
			continue
		}
		msg := stderr[r].String()
		if s.ExitCode != 3 || !frozenRe.MatchString(msg) {
			t.Errorf("rank %d: %v, stderr %q: want exit 3 and rank 2 named as frozen", r, s, msg)
		}
		t.Logf("rank %d: %s", r, strings.TrimSpace(msg))
	}
}
