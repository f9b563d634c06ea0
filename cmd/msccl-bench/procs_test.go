package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

// The test binary doubles as msccl-bench: --procs starts it again (it is
// os.Executable), and with this variable set it runs main.
const asCommand = "MSCCL_BENCH_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommand) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// bench runs msccl-bench as a command and returns its output and exit
// status.
func benchCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCommand+"=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("msccl-bench %s: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), code
}

// rowRe matches a table row: size, count, type, redop, time, algbw,
// busbw, #wrong.
var rowRe = regexp.MustCompile(`^ +(\d+) +(\d+) +\S+ +\S+ +[\d.]+ +[\d.]+ +[\d.]+ +(\S+)$`)

// The CI proof of the runtime without a GPU: four processes, one rank
// each, sharing buffers through memfd, run three library algorithms and
// every rank's result is checked against the CPU executor.
func TestProcsCPU(t *testing.T) {
	for _, algo := range []string{"allreduce_twoshot", "allgather_ring", "alltoall_direct"} {
		t.Run(algo, func(t *testing.T) {
			start := time.Now()
			out, errOut, code := benchCmd(t, "--procs", "4", "--device", "cpu", "--algo", algo, "--ranks", "4", "-b", "1K", "-e", "1M", "-f", "32", "-c", "-n", "2", "-w", "1")
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !strings.Contains(out, "4 ranks in 4 processes on the cpu device") {
				t.Errorf("header missing:\n%s", out)
			}
			sizes := rowSizes(t, out)
			if strings.Join(sizes, " ") != "1024 32768 1048576" {
				t.Errorf("rows for sizes %v, want 1024 32768 1048576:\n%s", sizes, out)
			}
			if errOut != "" {
				t.Errorf("stderr: %s", errOut)
			}
			t.Logf("%s: %v", algo, time.Since(start).Round(time.Millisecond))
		})
	}
}

// Two nodes declared on one machine (--nodes 2 sets MSCCL_NODE per
// rank): the hierarchical plans' port channels between them go through
// the socket transport (TCP between the processes' proxies), their memory
// channels stay inside each node, and rank 0 receives the other node's
// outputs to check them; the upstream 2×4 LL reduce-scatter sends port
// packets across.
func TestProcsAcrossNodes(t *testing.T) {
	for _, c := range [][]string{
		{"--procs", "4", "--nodes", "2", "--algo", "allreduce_hierarchical", "-D", "nodes=2", "-D", "gpus_per_node=2", "--ranks", "4", "-b", "1K", "-e", "1M", "-f", "32"},
		{"--procs", "8", "--nodes", "2", "--plan", "../../testdata/peer-plans/reducescatter_pkt_2x4.json", "-b", "4K", "-e", "64K", "-f", "16", "-d", "f16"},
	} {
		t.Run(c[5], func(t *testing.T) {
			out, errOut, code := benchCmd(t, append(c, "--device", "cpu", "-c", "-n", "2", "-w", "1")...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if rows := len(rowSizes(t, out)); rows < 2 {
				t.Errorf("%d rows:\n%s", rows, out)
			}
		})
	}
	// A plan whose memory channels would cross the boundary is refused
	// by every rank, naming the channel.
	out, errOut, code := benchCmd(t, "--procs", "4", "--nodes", "2", "--device", "cpu", "--algo", "allreduce_twoshot", "--ranks", "4", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")
	if code == 0 || !strings.Contains(errOut, "memory channels connect ranks of one node only") {
		t.Errorf("twoshot across nodes: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// rowSizes returns the sizes of the table's rows in out, failing t for
// every row whose #wrong is not 0.
func rowSizes(t *testing.T, out string) []string {
	t.Helper()
	var sizes []string
	for _, line := range strings.Split(out, "\n") {
		if m := rowRe.FindStringSubmatch(line); m != nil {
			sizes = append(sizes, m[1])
			if m[3] != "0" {
				t.Errorf("row with #wrong %s: %q", m[3], line)
			}
		}
	}
	return sizes
}

// Sixteen processes, one rank each, on however few cores: an LL plan
// whose every rank reads every other's packets.
func TestProcsCPU16(t *testing.T) {
	fulltest.Skip(t, "16 processes")
	start := time.Now()
	out, errOut, code := benchCmd(t, "--procs", "16", "--device", "cpu", "--algo", "allreduce_allpairs_packet", "--ranks", "16", "-b", "16K", "-e", "64K", "-f", "4", "-c", "-n", "2", "-w", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	rows := len(rowSizes(t, out))
	if rows != 2 {
		t.Errorf("%d rows, want 2:\n%s", rows, out)
	}
	t.Logf("16 processes: %v", time.Since(start).Round(time.Millisecond))
}

// A plan that deadlocks (both ranks wait before they signal) ends with
// the watchdog's error naming every stuck block and op, not a hang.
func TestProcsCPUDeadlock(t *testing.T) {
	start := time.Now()
	out, errOut, code := benchCmd(t, "--procs", "2", "--device", "cpu", "--plan", "../../testdata/broken/sim/circular_waits.json", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--timeout", "500ms")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"[rank 0] msccl-bench: at 1024 bytes: rank 0: watchdog: a wait ran past 500ms; gpus[0].threadblocks[0].ops[0] (rlxwait) waits for signal #1 on memory channel 0 of rank 0 (peer rank 1), 0 arrived",
		"[rank 1] msccl-bench: at 1024 bytes: rank 1: watchdog: a wait ran past 500ms; gpus[1].threadblocks[0].ops[0] (rlxwait) waits for signal #1 on memory channel 0 of rank 1 (peer rank 0), 0 arrived",
		"msccl-bench: 2 processes: bootstrap: job failed",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestProcsArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--procs", "2", "--plan", "p.json"}, "--procs 2 needs --device cpu"},
		{[]string{"--procs", "-1", "--device", "cpu", "--plan", "p.json"}, "--procs must be at least 1, got -1"},
		{[]string{"--procs", "4", "--nodes", "3", "--device", "cpu", "--plan", "p.json"}, "--nodes 3 does not divide --procs 4"},
		{[]string{"--nodes", "2", "--device", "cpu", "--plan", "p.json"}, "--nodes 2 needs --procs"},
		{[]string{"--device", "tpu", "--plan", "p.json"}, `--device: unknown device "tpu" (want cuda or cpu)`},
		{[]string{"--device", "cpu", "-G", "--plan", "p.json"}, "-G (CUDA graphs) needs --device cuda"},
	} {
		var out bytes.Buffer
		err := run(c.args, &out)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || exitCode(err) != 2 {
			t.Errorf("run(%q): got %v (exit %d), want exit 2 and %q", c.args, err, exitCode(err), c.want)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"--procs", "2", "--device", "cpu", "--algo", "allgather_ring", "--ranks", "4"}, &out); err == nil || err.Error() != "--procs 2: allgather_ring has 4 ranks, one process each; give --procs 4" || exitCode(err) != 1 {
		t.Errorf("--procs 2 with a 4-rank plan: %v", err)
	}
	// A plan of 4 ranks in a job of one process (no launcher variables).
	_, errOut, code := benchCmd(t, "--device", "cpu", "--algo", "allgather_ring", "--ranks", "4", "-b", "1K", "-e", "1K")
	if code != 1 || !strings.Contains(errOut, "allgather_ring has 4 ranks, but this job has 1 (run it with --procs 4") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestWithoutFlag(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"--procs 4 --device cpu", "--device cpu"},
		{"--procs=4 -c", "-c"},
		{"-procs 4 -c --plan x", "-c --plan x"},
		{"-c ---procs 4", "-c ---procs 4"},
	} {
		if got := strings.Join(withoutFlag(strings.Fields(c.in), "procs"), " "); got != c.want {
			t.Errorf("withoutFlag(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// A launcher killed outright (no chance to clean up) takes its ranks with
// it: no orphans keep spinning on shared memory.
func TestProcsLauncherKilled(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command(os.Args[0], "--procs", "2", "--device", "cpu", "--algo", "allgather_ring", "--ranks", "2", "-b", "1K", "-e", "64K", "-n", "100000", "-w", "0")
	cmd.Env = append(os.Environ(), asCommand+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var kids []int
	for deadline := time.Now().Add(20 * time.Second); len(kids) < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		kids = children(cmd.Process.Pid)
	}
	if len(kids) < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the launcher started %d ranks", len(kids))
	}
	cmd.Process.Kill()
	cmd.Wait()
	for _, k := range kids {
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(k, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := syscall.Kill(k, 0); err != syscall.ESRCH {
			t.Errorf("rank process %d outlived its launcher: %v", k, err)
			syscall.Kill(k, syscall.SIGKILL)
		}
	}
}

// The same command runs unchanged as one rank under a launcher: here two
// processes with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID) and
// the MSCCL_SECRET the user sets, since torchrun hands out no secret.
func TestUnderTorchrun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var outs [2]bytes.Buffer
	var errs [2]bytes.Buffer
	job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{
		N:            2,
		Argv:         []string{"", "--device", "cpu", "--algo", "allgather_ring", "--ranks", "2", "-b", "1K", "-e", "64K", "-f", "8", "-c", "-n", "2", "-w", "1"},
		NoRendezvous: true,
		KeepGoing:    true,
		Env: []string{asCommand + "=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port-1), "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=" + t.Name(),
			"MSCCL_SECRET=" + strconv.FormatInt(time.Now().UnixNano(), 36)},
		RankEnv: func(r int) []string {
			return []string{"RANK=" + strconv.Itoa(r), "LOCAL_RANK=" + strconv.Itoa(r)}
		},
		Stdout: func(r int) io.Writer { return &outs[r] },
		Stderr: func(r int) io.Writer { return &errs[r] },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Wait(); err != nil {
		t.Fatalf("%v\nrank 0: %s\nrank 1: %s", err, errs[0].String(), errs[1].String())
	}
	rows := 0
	for _, line := range strings.Split(outs[0].String(), "\n") {
		if m := rowRe.FindStringSubmatch(line); m != nil {
			rows++
			if m[3] != "0" {
				t.Errorf("row with #wrong %s: %q", m[3], line)
			}
		}
	}
	if rows != 3 || outs[1].Len() != 0 {
		t.Errorf("rank 0 printed %d rows (want 3), rank 1 printed %q\n%s", rows, outs[1].String(), outs[0].String())
	}
}

// startLong starts msccl-bench --procs 2 on a sweep that runs for minutes
// and returns the launcher and its two ranks' pids, by rank.
func startLong(t *testing.T, extra ...string) (*exec.Cmd, *bytes.Buffer, [2]int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	args := append([]string{"--procs", "2", "--device", "cpu", "--algo", "allgather_ring", "--ranks", "2", "-b", "1K", "-e", "64K", "-n", "100000", "-w", "0"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCommand+"=1", "MSCCL_BOOTSTRAP_TIMEOUT=5s")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	var pids [2]int
	for deadline := time.Now().Add(20 * time.Second); pids[0] == 0 || pids[1] == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the launcher did not start its ranks")
		}
		for _, k := range children(cmd.Process.Pid) {
			env, _ := os.ReadFile("/proc/" + strconv.Itoa(k) + "/environ")
			for _, kv := range strings.Split(string(env), "\x00") {
				if r, ok := strings.CutPrefix(kv, "MSCCL_RANK="); ok && (r == "0" || r == "1") {
					pids[r[0]-'0'] = k
				}
			}
		}
	}
	return cmd, &errOut, pids
}

// A rank stopped mid-sweep (SIGSTOP) ends the job: the other rank's
// watchdog names it, the launcher kills the stopped rank, exits non-zero
// naming it, and leaves no process behind.
func TestProcsStoppedRank(t *testing.T) {
	cmd, errOut, pids := startLong(t, "--timeout", "1s")
	el := signalRank1(t, cmd, errOut, pids, syscall.SIGSTOP)
	t.Logf("launcher exited %d, %v after the SIGSTOP (watchdog 1 s)", cmd.ProcessState.ExitCode(), el.Round(time.Millisecond))
	if cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("exit %d, want 1\n%s", cmd.ProcessState.ExitCode(), errOut)
	}
	if want := "rank 1 (pid " + strconv.Itoa(pids[1]) + ") was stopped"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	if el > 8*time.Second {
		t.Errorf("took %v (watchdog 1 s, linger %v)\n%s", el, launchLinger, errOut)
	}
	for r, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("rank %d (pid %d) outlived the launcher: %v", r, pid, err)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// signalRank1 sends sig to rank 1 once the job is in its timed loop and
// returns how long the launcher took to exit after it.
func signalRank1(t *testing.T, cmd *exec.Cmd, errOut *bytes.Buffer, pids [2]int, sig syscall.Signal) time.Duration {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // into the timed loop
	sent := time.Now()
	if err := syscall.Kill(pids[1], sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(pids[1], syscall.SIGKILL)
		t.Fatalf("the launcher still runs 20 s after rank 1 got %v\n%s", sig, errOut)
	}
	return time.Since(sent)
}

// A rank that gives up on its own (here SIGTERM cancels its run) tells
// the others why as it leaves: rank 0 fails at once quoting rank 1's
// reason, and the launcher exits without waiting out its linger.
func TestProcsRankGivesUp(t *testing.T) {
	cmd, errOut, pids := startLong(t)
	el := signalRank1(t, cmd, errOut, pids, syscall.SIGTERM)
	t.Logf("launcher exited %d, %v after the SIGTERM", cmd.ProcessState.ExitCode(), el.Round(time.Millisecond))
	if cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("exit %d, want 1\n%s", cmd.ProcessState.ExitCode(), errOut)
	}
	// Rank 0 quotes rank 1's own error (its run was cancelled).
	if !regexp.MustCompile(`\[rank 0\] .*rank 1 has closed its bootstrap: it failed and left the job: at \d+ bytes: .*context canceled`).MatchString(errOut.String()) {
		t.Errorf("rank 0 does not quote rank 1's reason:\n%s", errOut)
	}
	if el >= launchLinger {
		t.Errorf("took %v: rank 0 did not end on its own within the launcher's linger (%v)\n%s", el, launchLinger, errOut)
	}
}

// The job's secret is in the ranks' environment (readable by their user
// only), never on a command line any local user can read.
func TestProcsSecretNotOnCommandLine(t *testing.T) {
	cmd, _, pids := startLong(t)
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pids[1]) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	var id bootstrap.UniqueID
	for _, kv := range strings.Split(string(env), "\x00") {
		if s, ok := strings.CutPrefix(kv, "MSCCL_UNIQUE_ID="); ok {
			if id, err = bootstrap.ParseUniqueID(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	secret := hex.EncodeToString(id.Secret[:])
	if id.Addr == "" {
		t.Fatal("rank 1's environment has no MSCCL_UNIQUE_ID: the test looks in the wrong place")
	}
	for _, pid := range []int{cmd.Process.Pid, pids[0], pids[1]} {
		argv, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(argv), secret) {
			t.Errorf("pid %d's command line holds the secret: %q", pid, argv)
		}
	}
}
