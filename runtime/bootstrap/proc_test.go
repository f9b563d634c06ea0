package bootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The multi-process tests re-run this test binary as the ranks (the
// helper-process pattern): TestMain sees BOOTSTRAP_TEST_CHILD and plays
// the scenario it names instead of running tests.
const childVar = "BOOTSTRAP_TEST_CHILD"

func TestMain(m *testing.M) {
	if s := os.Getenv(childVar); s != "" {
		os.Exit(child(s))
	}
	os.Exit(m.Run())
}

// child plays one rank; it prints "config ...", then "done" or
// "failed KIND ..." (see describe), and exits 0, or 3 on a bootstrap error.
func child(scenario string) int {
	if scenario == "absent" {
		return 0 // a rank that never starts
	}
	if scenario == "sleepers" {
		// Rank BOOTSTRAP_TEST_VICTIM fails at once; the others would run
		// for a minute unless the job kills them.
		if os.Getenv("MSCCL_RANK") == os.Getenv("BOOTSTRAP_TEST_VICTIM") {
			return 1
		}
		time.Sleep(time.Minute)
		return 0
	}
	if scenario == "launcher" {
		// A launcher (like msccl-bench --procs) that gets killed: its
		// ranks must not outlive it.
		job, err := SpawnLocal(context.Background(), 2, []string{os.Args[0]}, []string{childVar + "=sleepers", "BOOTSTRAP_TEST_VICTIM=-1"})
		if err != nil {
			fmt.Println("failed", err)
			return 3
		}
		fmt.Println("pids", strings.Trim(fmt.Sprint(job.Pids()), "[]"))
		time.Sleep(time.Minute)
		return 0
	}
	if os.Getenv("BOOTSTRAP_TEST_QUIET") != "" {
		os.Stdout = nil // SpawnLocal's children write to the test's own output
	}
	ctx := context.Background()
	if d, err := time.ParseDuration(os.Getenv("BOOTSTRAP_TEST_DELAY")); err == nil {
		time.Sleep(d)
	}
	cfg, err := FromEnv()
	if err != nil {
		fmt.Println("failed", describe(err))
		return 3
	}
	fmt.Printf("config rank=%d world=%d local=%d/%d node=%s src=%s\n", cfg.Rank, cfg.World, cfg.LocalRank, cfg.LocalWorld, cfg.Node, cfg.Source)
	b, err := Connect(ctx, cfg)
	if err != nil {
		fmt.Println("failed", describe(err))
		return 3
	}
	defer b.Close()
	victim, _ := strconv.Atoi(os.Getenv("BOOTSTRAP_TEST_VICTIM"))
	switch scenario {
	case "exercise":
		err = exercise(ctx, b)
	case "hang":
		if b.Rank() == victim {
			fmt.Println("hanging")
			time.Sleep(time.Minute)
		}
		err = exercise(ctx, b)
	case "killed":
		if err = b.Barrier(ctx); err != nil {
			break
		}
		if b.Rank() == victim {
			fmt.Println("ready")
			time.Sleep(time.Minute)
		}
		fmt.Println("entering")
		_, err = b.AllGather(ctx, []byte("x"))
	case "fail":
		if b.Rank() == victim {
			fmt.Println("failing on purpose")
			return 1
		}
		err = exercise(ctx, b)
	default:
		err = fmt.Errorf("unknown scenario %q", scenario)
	}
	if err != nil {
		fmt.Println("failed", describe(err))
		return 3
	}
	fmt.Println("done")
	return 0
}

// describe prints an error's kind and the ranks it names, for the parent
// to check: "timeout ranks=2,3", "peer rank=2", "protocol rank=1".
func describe(err error) string {
	var te *TimeoutError
	var pe *PeerError
	var pr *ProtocolError
	switch {
	case errors.As(err, &te):
		s := make([]string, len(te.Ranks))
		for i, r := range te.Ranks {
			s[i] = strconv.Itoa(r)
		}
		return "timeout ranks=" + strings.Join(s, ",") + " | " + err.Error()
	case errors.As(err, &pe):
		return fmt.Sprintf("peer rank=%d | %v", pe.Rank, err)
	case errors.As(err, &pr):
		return fmt.Sprintf("protocol rank=%d | %v", pr.Rank, err)
	}
	return "other | " + err.Error()
}

// syncBuffer collects one child's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// procs runs n copies of this test binary playing scenario and returns
// their output; they are killed and reaped when the test ends.
type procs struct {
	job *Job
	out []*syncBuffer
}

func spawn(t *testing.T, sc SpawnConfig, scenario string) *procs {
	t.Helper()
	p := &procs{}
	for range sc.N {
		p.out = append(p.out, &syncBuffer{})
	}
	sc.Argv = []string{""}
	sc.Env = append(sc.Env, childVar+"="+scenario)
	sc.Stdout = func(r int) io.Writer { return p.out[r] }
	sc.Stderr = sc.Stdout
	job, err := Spawn(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	p.job = job
	t.Cleanup(func() { job.Kill() })
	return p
}

func (p *procs) wait(t *testing.T, limit time.Duration) []RankStatus {
	t.Helper()
	select {
	case <-p.job.Done():
	case <-time.After(limit):
		p.job.Kill()
		t.Fatalf("ranks still running after %v:\n%s", limit, p.dump())
	}
	st, _ := p.job.Wait()
	return st
}

func (p *procs) dump() string {
	var b strings.Builder
	for r, o := range p.out {
		fmt.Fprintf(&b, "--- rank %d:\n%s", r, o)
	}
	return b.String()
}

// awaitFailures waits (up to 10 s) for every rank but skip, which keep
// running (a hung or frozen rank stays up), to report a failure, and
// checks that each report starts with want.
func (p *procs) awaitFailures(t *testing.T, skip int, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r := range p.out {
		if r == skip {
			continue
		}
		for !strings.Contains(p.out[r].String(), "failed") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		p.expect(t, r, want)
	}
}

// expect checks that rank r's last output line starts with want.
func (p *procs) expect(t *testing.T, r int, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(p.out[r].String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, want) {
		t.Errorf("rank %d ended with %q, want %q\n%s", r, last, want, p.dump())
	}
}

func TestProcesses(t *testing.T) {
	for _, n := range []int{2, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := spawn(t, SpawnConfig{N: n, Timeout: 15 * time.Second}, "exercise")
			for _, s := range p.wait(t, 20*time.Second) {
				if s.Err != nil {
					t.Errorf("%v", s)
				}
			}
			for r := 0; r < n; r++ {
				p.expect(t, r, "done")
			}
		})
	}
}

func TestProcessNeverArrives(t *testing.T) {
	t.Parallel()
	const n, victim = 4, 2
	p := spawn(t, SpawnConfig{N: n, Timeout: 3 * time.Second, KeepGoing: true, RankEnv: func(r int) []string {
		if r == victim {
			return []string{childVar + "=absent"}
		}
		return nil
	}}, "exercise")
	p.wait(t, 10*time.Second)
	for r := 0; r < n; r++ {
		if r != victim {
			p.expect(t, r, "failed timeout ranks=2 ")
		}
	}
}

func TestProcessHangs(t *testing.T) {
	t.Parallel()
	const n, victim = 4, 1
	p := spawn(t, SpawnConfig{N: n, Timeout: 3 * time.Second, KeepGoing: true, Env: []string{"BOOTSTRAP_TEST_VICTIM=" + strconv.Itoa(victim)}}, "hang")
	p.awaitFailures(t, victim, "failed timeout ranks=1 ")
}

func TestProcessKilledMidCollective(t *testing.T) {
	t.Parallel()
	const n, victim = 5, 3
	p := midCollective(t, n, victim, 20*time.Second)
	killed := time.Now()
	if err := p.job.Signal(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := p.wait(t, 10*time.Second)
	if el := time.Since(killed); el > 3*time.Second {
		t.Errorf("the others took %v to fail (timeout 20 s): not prompt", el)
	}
	if st[victim].Signal != "killed" {
		t.Errorf("victim: %v", st[victim])
	}
	for r := 0; r < n; r++ {
		if r != victim {
			p.expect(t, r, fmt.Sprintf("failed peer rank=%d ", victim))
		}
	}
}

// A rank frozen mid-collective (SIGSTOP: its connection stays open) is
// named by the timeout on every other rank.
func TestProcessFrozenMidCollective(t *testing.T) {
	t.Parallel()
	const n, victim = 4, 0 // rank 0 itself, and with it the root
	p := midCollective(t, n, victim, 3*time.Second)
	if err := p.job.Signal(victim, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.job.Signal(victim, syscall.SIGCONT) })
	// Rank 0's root is frozen with it, so nobody can name the ranks
	// missing: the others blame rank 0 after their timeout and grace.
	p.awaitFailures(t, victim, "failed timeout ranks=0 ")
}

// midCollective starts n ranks that pass a barrier and then enter an
// all-gather, except victim, which sleeps; it returns once they are there.
func midCollective(t *testing.T, n, victim int, timeout time.Duration) *procs {
	p := spawn(t, SpawnConfig{N: n, Timeout: timeout, KeepGoing: true, Env: []string{"BOOTSTRAP_TEST_VICTIM=" + strconv.Itoa(victim)}}, "killed")
	ready := func() bool {
		if !strings.Contains(p.out[victim].String(), "ready") {
			return false
		}
		for r := 0; r < n; r++ {
			if r != victim && !strings.Contains(p.out[r].String(), "entering") {
				return false
			}
		}
		return true
	}
	for start := time.Now(); !ready(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("ranks did not reach the collective:\n%s", p.dump())
		}
	}
	time.Sleep(50 * time.Millisecond) // let them block in it
	return p
}

// A stranger without the secret, and one that talks garbage, are refused
// while the job is forming; the job still completes.
func TestProcessStranger(t *testing.T) {
	const n = 3
	p := spawn(t, SpawnConfig{N: n, Timeout: 10 * time.Second, RankEnv: func(r int) []string {
		if r == n-1 {
			return []string{"BOOTSTRAP_TEST_DELAY=500ms"} // the job is still forming when the strangers come
		}
		return nil
	}}, "exercise")
	id := p.job.ID()
	waitListening(t, id.Addr)
	wrong := id
	wrong.Secret[5] ^= 0x80
	if _, err := Connect(context.Background(), Config{Rank: n - 1, World: n, ID: wrong, Timeout: 10 * time.Second}); !errors.Is(err, errRefused) {
		t.Errorf("stranger with a wrong secret: %v, want refused", err)
	}
	if c, err := net.Dial("tcp", id.Addr); err == nil {
		c.Write(bytes.Repeat([]byte{0xff}, 100))
		c.Close()
	}
	for _, s := range p.wait(t, 15*time.Second) {
		if s.Err != nil {
			t.Errorf("%v\n%s", s, p.dump())
		}
	}
}

// A peer that holds the secret but then sends malformed frames fails the
// job with an error naming it, on every rank, and nobody panics.
func TestProcessFuzzedPeer(t *testing.T) {
	const n = 4
	raw := func(kind byte, payload ...byte) []byte {
		return append([]byte{0, 0, 0, byte(1 + len(payload)), kind}, payload...)
	}
	frames := [][]byte{
		raw(kGather, 0x80),               // truncated varint
		raw(99),                          // unknown kind
		{0xff, 0xff, 0xff, 0xff, kSend},  // over the frame limit
		raw(kSend, 1, 2, 50, 'a', 'b'),   // blob overruns the frame
		{0, 0, 0, 10, kSend, 1},          // frame cut short, then the connection ends
		raw(kGather, 9, opBarrier, 0, 0), // out-of-order collective
		raw(kGather, 1, 7, 0, 0),         // unknown collective op
		raw(kWelcome, 0),                 // a kind only the root may send
		raw(kSend, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), // varint overflow
	}
	for i, f := range frames {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := spawn(t, SpawnConfig{N: n - 1, Timeout: 10 * time.Second, KeepGoing: true, Env: []string{"MSCCL_WORLD_SIZE=" + strconv.Itoa(n)}}, "exercise")
			id := p.job.ID()
			cfg := &Config{Rank: n - 1, World: n, ID: id, Node: "fuzz", Timeout: 10 * time.Second}
			var c net.Conn
			for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				var err error
				if c, err = net.Dial("tcp", id.Addr); err == nil {
					if err = clientHello(c, cfg, 10000, time.Now().Add(10*time.Second)); err == nil {
						break
					}
					c.Close()
				}
				if time.Since(start) > 10*time.Second {
					t.Fatalf("fuzzed peer could not join: %v", err)
				}
			}
			defer c.Close()
			if m, err := readMsg(c, frameLimit); err != nil || m.kind != kWelcome {
				t.Fatalf("welcome: %v %v", m, err)
			}
			c.Write(f)
			c.(*net.TCPConn).CloseWrite()
			p.wait(t, 15*time.Second)
			for r := 0; r < n-1; r++ {
				p.expect(t, r, fmt.Sprintf("failed protocol rank=%d ", n-1))
			}
		})
	}
}

// SpawnLocal as msccl-bench --procs uses it: the children find each other
// from the MSCCL_* environment alone.
func TestSpawnLocal(t *testing.T) {
	job, err := SpawnLocal(context.Background(), 3, []string{os.Args[0]}, []string{childVar + "=exercise", "BOOTSTRAP_TEST_QUIET=1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Kill() })
	st, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 3 {
		t.Fatalf("%d statuses", len(st))
	}
}

// When one rank fails, the job kills the others at once and Wait names
// the one that failed first; no process is left behind.
func TestSpawnKillsOthersOnFailure(t *testing.T) {
	const n, victim = 4, 2
	start := time.Now()
	p := spawn(t, SpawnConfig{N: n, Env: []string{"BOOTSTRAP_TEST_VICTIM=" + strconv.Itoa(victim)}}, "sleepers")
	st := p.wait(t, 10*time.Second)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v to stop the job", el)
	}
	_, err := p.job.Wait()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("first rank %d", victim)) {
		t.Errorf("Wait: %v, want the first failure to be rank %d", err, victim)
	}
	for r, s := range st {
		switch {
		case r == victim && (s.Killed || s.ExitCode != 1):
			t.Errorf("victim: %v", s)
		case r != victim && !s.Killed:
			t.Errorf("rank %d not killed: %v", r, s)
		}
		if err := syscall.Kill(s.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("rank %d (pid %d) still exists: %v", r, s.Pid, err)
		}
	}
}

func TestSpawnErrors(t *testing.T) {
	if _, err := Spawn(context.Background(), SpawnConfig{N: 0, Argv: []string{""}}); err == nil {
		t.Error("0 processes accepted")
	}
	if _, err := Spawn(context.Background(), SpawnConfig{N: 2}); err == nil {
		t.Error("no program accepted")
	}
	if _, err := Spawn(context.Background(), SpawnConfig{N: 2, Argv: []string{"/nonexistent/program"}}); err == nil || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("missing program: %v", err)
	}
}

// freeDerived finds a job name whose derived port is free right now.
func freeDerived(t *testing.T, prefix, suffix string) string {
	for i := 0; i < 100; i++ {
		job := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e9+int64(i))
		if ln, err := net.Listen("tcp", ":"+strconv.Itoa(derivedPort(job+suffix))); err == nil {
			ln.Close()
			return job
		}
	}
	t.Fatal("no free derived port")
	return ""
}

// The three launchers' environments, set for each child as torchrun,
// mpirun and srun would set them, with nothing else configured.
func TestLaunchers(t *testing.T) {
	const n = 4
	// Neutralise anything the test itself may have inherited.
	clear := []string{"MSCCL_RANK=", "MSCCL_WORLD_SIZE=", "MSCCL_LOCAL_RANK=", "MSCCL_LOCAL_WORLD_SIZE=", "MSCCL_UNIQUE_ID=",
		"MSCCL_UNIQUE_ID_FILE=", "MSCCL_BOOTSTRAP_ADDR=", "MSCCL_BOOTSTRAP_PORT=", "MSCCL_SECRET=", "MSCCL_NODE=", "MSCCL_BOOTSTRAP_LISTEN_FD=",
		"RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=", "OMPI_COMM_WORLD_RANK=", "OMPI_COMM_WORLD_SIZE=", "SLURM_PROCID=", "SLURM_NTASKS=", "SLURM_STEP_NUM_TASKS="}
	ln, err := listenFree("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	masterPort := ln.Addr().(*net.TCPAddr).Port - 1 // the root takes MASTER_PORT+1
	ln.Close()
	runID := fmt.Sprint(time.Now().UnixNano())
	// The secret comes from the user (MSCCL_SECRET) for torchrun and
	// Slurm, and from mpirun's own per-job key for Open MPI.
	var key [16]byte
	rand.Read(key[:])
	secret := hex.EncodeToString(key[:])
	ompiJob, slurmJob := freeDerived(t, "prterun-test-", ""), freeDerived(t, "", ".0")
	launchers := []struct {
		name  string
		env   func(r int) []string
		local string // local=rank/size for rank 1
		src   string
	}{
		{"torchrun", func(r int) []string {
			// torchrun --nnodes 2 --nproc-per-node 2 (both "nodes" here).
			return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=4", "LOCAL_RANK=" + strconv.Itoa(r%2), "LOCAL_WORLD_SIZE=2",
				"GROUP_RANK=" + strconv.Itoa(r/2), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(masterPort),
				"TORCHELASTIC_RUN_ID=" + runID, "TORCHELASTIC_RESTART_COUNT=0", "MSCCL_SECRET=" + secret}
		}, "local=1/2", "src=torchrun, MSCCL_SECRET"},
		{"openmpi", func(r int) []string {
			return []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r),
				"OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_COMM_WORLD_NODE_RANK=0", "PMIX_RANK=" + strconv.Itoa(r), "PMIX_NAMESPACE=" + ompiJob,
				"OMPI_MCA_orte_precondition_transports=" + secret[:16] + "-" + secret[16:]}
		}, "local=1/4", "src=openmpi, the launcher's per-job key"},
		{"slurm", func(r int) []string {
			return []string{"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=4", "SLURM_STEP_NUM_TASKS=4", "SLURM_LOCALID=" + strconv.Itoa(r),
				"SLURM_NODEID=0", "SLURM_STEP_TASKS_PER_NODE=4", "SLURM_STEP_NODELIST=localhost", "SLURM_JOB_ID=" + slurmJob,
				"SLURM_STEP_ID=0", "SLURMD_NODENAME=localhost", "MSCCL_SECRET=" + secret}
		}, "local=1/4", "src=slurm, MSCCL_SECRET"},
	}
	for _, l := range launchers {
		t.Run(l.name, func(t *testing.T) {
			p := spawn(t, SpawnConfig{N: n, NoRendezvous: true, Env: append(clear, "MSCCL_BOOTSTRAP_TIMEOUT=10s"), RankEnv: l.env}, "exercise")
			for _, s := range p.wait(t, 15*time.Second) {
				if s.Err != nil {
					t.Errorf("%v\n%s", s, p.dump())
				}
			}
			if out := p.out[1].String(); !strings.Contains(out, "config rank=1 world=4 "+l.local) || !strings.Contains(out, l.src) {
				t.Errorf("rank 1 read its environment as:\n%s", out)
			}
			for r := 0; r < n; r++ {
				p.expect(t, r, "done")
			}
		})
	}
}

// Ranks die with their launcher (PR_SET_PDEATHSIG), even when it is
// killed without a chance to clean up.
func TestSpawnNoOrphans(t *testing.T) {
	p := spawn(t, SpawnConfig{N: 1, NoRendezvous: true}, "launcher")
	var pids []int
	for start := time.Now(); pids == nil; time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(p.out[0].String(), "\n") {
			if f, ok := strings.CutPrefix(line, "pids "); ok {
				for _, s := range strings.Fields(f) {
					pid, _ := strconv.Atoi(s)
					pids = append(pids, pid)
				}
			}
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("launcher did not start its ranks:\n%s", p.dump())
		}
	}
	if err := p.job.Signal(0, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 5*time.Second)
	for _, pid := range pids {
		for start := time.Now(); alive(pid); time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 5*time.Second {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("rank pid %d outlived its killed launcher", pid)
			}
		}
	}
}

// alive reports whether pid exists and is not a zombie (an orphan that
// died waits for init to reap it, which a container's init may not do).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A rank stopped mid-collective (SIGSTOP) ends the job: the others time
// out naming it, the job kills it after Linger (SIGKILL ends a stopped
// process), Wait names it as stopped, and no process is left.
func TestSpawnStoppedRank(t *testing.T) {
	t.Parallel()
	const n, victim = 3, 1
	p := spawn(t, SpawnConfig{N: n, Timeout: 2 * time.Second, Linger: 500 * time.Millisecond, Env: []string{"BOOTSTRAP_TEST_VICTIM=" + strconv.Itoa(victim)}}, "killed")
	for start := time.Now(); !strings.Contains(p.out[victim].String(), "ready"); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the victim did not get ready:\n%s", p.dump())
		}
	}
	stopped := time.Now()
	if err := p.job.Signal(victim, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	st := p.wait(t, 15*time.Second)
	t.Logf("job ended %v after the SIGSTOP (bootstrap timeout 2 s)", time.Since(stopped).Round(time.Millisecond))
	_, err := p.job.Wait()
	if want := fmt.Sprintf("rank %d (pid %d) was stopped", victim, st[victim].Pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Wait: %v, want it to say %q", err, want)
	}
	if !st[victim].Stopped || !st[victim].Killed {
		t.Errorf("victim: %+v", st[victim])
	}
	for r, s := range st {
		if alive(s.Pid) {
			t.Errorf("rank %d (pid %d) outlived the job", r, s.Pid)
			syscall.Kill(s.Pid, syscall.SIGKILL)
		}
	}
}

// The unique id (its secret) reaches the children in their environment,
// which only their user can read, and never on their command lines,
// which every local user can (ps, /proc/PID/cmdline).
func TestSpawnSecretNotOnCommandLine(t *testing.T) {
	p := spawn(t, SpawnConfig{N: 2, Env: []string{"BOOTSTRAP_TEST_VICTIM=-1"}}, "sleepers")
	id := p.job.ID()
	secret := hex.EncodeToString(id.Secret[:])
	for r, pid := range p.job.Pids() {
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		if strings.Contains(string(argv), secret) {
			t.Errorf("rank %d's command line holds the secret: %q", r, argv)
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !strings.Contains(string(env), "MSCCL_UNIQUE_ID="+id.String()) {
			t.Errorf("rank %d's environment lacks the id (%v): the test looks in the wrong place", r, err)
		}
	}
}

// With StopLimit, the job itself notices a rank stopped that long (its
// peers here would wait a minute) and ends, naming it first.
func TestSpawnStopLimit(t *testing.T) {
	t.Parallel()
	p := spawn(t, SpawnConfig{N: 3, StopLimit: 500 * time.Millisecond, Env: []string{"BOOTSTRAP_TEST_VICTIM=-1"}}, "sleepers")
	stopped := time.Now()
	if err := p.job.Signal(2, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	st := p.wait(t, 10*time.Second)
	if d := time.Since(stopped); d > 4*time.Second {
		t.Errorf("the job ended %v after the SIGSTOP (limit 500ms)", d)
	}
	_, err := p.job.Wait()
	if want := fmt.Sprintf("rank 2 (pid %d) was stopped (SIGSTOP or a debugger) and answered no one, the first to fail", st[2].Pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Wait: %v, want %q", err, want)
	}
	for r, s := range st {
		if !s.Killed || alive(s.Pid) {
			t.Errorf("rank %d: %+v (alive %v)", r, s, alive(s.Pid))
		}
	}
}
