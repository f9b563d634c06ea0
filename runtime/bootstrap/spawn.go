package bootstrap

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SpawnConfig describes N local processes of one program, one rank each.
type SpawnConfig struct {
	N    int
	Argv []string // the program and its arguments; Argv[0] == "" runs this binary (os.Executable)
	Env  []string // added to every child's environment, after the MSCCL_* variables
	// RankEnv, when set, adds variables for one rank after Env (tests use
	// it to emulate a launcher, or to give one rank a different role).
	RankEnv func(rank int) []string
	// NoRendezvous leaves out the MSCCL_* variables, for callers whose
	// RankEnv sets a launcher's own environment instead.
	NoRendezvous bool
	// Stdout and Stderr give each rank's output a destination; nil means
	// this process's.
	Stdout, Stderr func(rank int) io.Writer
	// KeepGoing leaves the other ranks running when one fails; by default
	// they are killed, since a collective job cannot finish without it.
	KeepGoing bool
	// Linger, when > 0, is how long the other ranks get after the first
	// failure to exit on their own (and report it in their words, naming
	// the rank they lost) before they are killed.
	Linger time.Duration
	// StopLimit ends the job when a rank has been stopped (SIGSTOP,
	// SIGTSTP: Linux state T, read from /proc) that long while this
	// process runs: it answers no one, and its peers would otherwise wait
	// on it for as long as their own timeouts and cleanups take. 0 means
	// the bootstrap's timeout (Timeout, or DefaultTimeout); < 0 never.
	StopLimit time.Duration
	// Timeout, when > 0, is passed as MSCCL_BOOTSTRAP_TIMEOUT.
	Timeout time.Duration
}

// RankStatus is how one rank's process ended.
type RankStatus struct {
	Rank     int
	Pid      int
	ExitCode int    // -1 when a signal ended it
	Signal   string // the signal that ended it, if one did
	Killed   bool   // the job killed it (another rank failed, Kill, or ctx)
	// Stopped: it was stopped (SIGSTOP, SIGTSTP, a debugger) when the job
	// killed it, so it had stopped answering its peers.
	Stopped bool
	Err     error // nil when it exited with status 0
}

func (s RankStatus) String() string {
	switch {
	case s.Err == nil:
		return fmt.Sprintf("rank %d (pid %d): exit 0", s.Rank, s.Pid)
	case s.Killed && s.Stopped:
		return fmt.Sprintf("rank %d (pid %d): was stopped (SIGSTOP or a debugger) and answered no one; killed by the job (%v)", s.Rank, s.Pid, s.Err)
	case s.Killed:
		return fmt.Sprintf("rank %d (pid %d): killed by the job after another rank failed (%v)", s.Rank, s.Pid, s.Err)
	}
	return fmt.Sprintf("rank %d (pid %d): %v", s.Rank, s.Pid, s.Err)
}

// Job is a set of running rank processes.
type Job struct {
	id     UniqueID
	cmds   []*exec.Cmd
	keep   bool
	linger time.Duration
	done   chan struct{}

	mu    sync.Mutex
	first int // the first rank that failed on its own, -1 if none
	// firstStopped: first was found stopped past StopLimit, not exited.
	firstStopped bool

	status   []RankStatus
	exited   []bool
	killing  bool
	left     int
	stopOnce sync.Once
}

// killGrace is how long a child has between SIGTERM and SIGKILL.
const killGrace = time.Second

// SpawnLocal starts n processes of argv on this host with the MSCCL_*
// environment of an n-rank job (rank, world and local sizes, a fresh
// unique id on loopback), extraEnv added to each. It is what
// `msccl-bench --procs N` uses.
func SpawnLocal(ctx context.Context, n int, argv []string, extraEnv []string) (*Job, error) {
	return Spawn(ctx, SpawnConfig{N: n, Argv: argv, Env: extraEnv})
}

// Spawn starts the processes sc describes. Rank 0 inherits the root's
// listening socket (MSCCL_BOOTSTRAP_LISTEN_FD), so no other program can
// take the port between choosing it and binding it. The unique id, secret
// included, reaches the children in their environment (MSCCL_UNIQUE_ID),
// which only their user can read, never on their command lines. Each
// child leads a process group of its own that the job signals as a whole;
// children die with this process (Linux: PR_SET_PDEATHSIG), and ctx's end
// kills them all.
func Spawn(ctx context.Context, sc SpawnConfig) (*Job, error) {
	if sc.N < 1 || sc.N > maxWorld {
		return nil, fmt.Errorf("bootstrap: spawn %d processes: want 1..%d", sc.N, maxWorld)
	}
	if len(sc.Argv) == 0 {
		return nil, errors.New("bootstrap: spawn: no program given (Argv[0] == \"\" runs this binary)")
	}
	prog := sc.Argv[0]
	if prog == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bootstrap: spawn: this binary's path: %w", err)
		}
		prog = exe
	}
	j := &Job{keep: sc.KeepGoing, linger: sc.Linger, done: make(chan struct{}), first: -1, status: make([]RankStatus, sc.N), exited: make([]bool, sc.N), left: sc.N}
	var lnFile *os.File
	if !sc.NoRendezvous {
		ln, err := listenFree("127.0.0.1")
		if err != nil {
			return nil, err
		}
		j.id.Addr = ln.Addr().String()
		if _, err := rand.Read(j.id.Secret[:]); err != nil {
			ln.Close()
			return nil, err
		}
		lnFile, err = ln.File()
		ln.Close()
		if err != nil {
			return nil, fmt.Errorf("bootstrap: spawn: listener descriptor: %w", err)
		}
		defer lnFile.Close()
	}
	for r := 0; r < sc.N; r++ {
		cmd := exec.Command(prog, sc.Argv[1:]...)
		env := os.Environ()
		if !sc.NoRendezvous {
			env = append(env, "MSCCL_RANK="+strconv.Itoa(r), "MSCCL_WORLD_SIZE="+strconv.Itoa(sc.N),
				"MSCCL_LOCAL_RANK="+strconv.Itoa(r), "MSCCL_LOCAL_WORLD_SIZE="+strconv.Itoa(sc.N),
				"MSCCL_UNIQUE_ID="+j.id.String(), "MSCCL_BOOTSTRAP_LISTEN_FD=")
			if r == 0 {
				cmd.ExtraFiles = []*os.File{lnFile}
				env = append(env, "MSCCL_BOOTSTRAP_LISTEN_FD=3")
			}
		}
		if sc.Timeout > 0 {
			env = append(env, "MSCCL_BOOTSTRAP_TIMEOUT="+sc.Timeout.String())
		}
		env = append(env, sc.Env...)
		if sc.RankEnv != nil {
			env = append(env, sc.RankEnv(r)...)
		}
		cmd.Env = env
		cmd.Stdin = nil
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if sc.Stdout != nil {
			cmd.Stdout = sc.Stdout(r)
		}
		if sc.Stderr != nil {
			cmd.Stderr = sc.Stderr(r)
		}
		// A rank's own children may hold its output open after it exits;
		// do not let them hold up Wait.
		cmd.WaitDelay = killGrace
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		dieWithParent(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			for _, c := range j.cmds {
				c.Process.Kill()
				c.Wait()
			}
			return nil, fmt.Errorf("bootstrap: spawn rank %d (%s): %w", r, prog, err)
		}
		j.status[r] = RankStatus{Rank: r, Pid: cmd.Process.Pid}
		j.cmds = append(j.cmds, cmd)
	}
	j.left = len(j.cmds)
	for r, cmd := range j.cmds {
		go j.reap(r, cmd)
	}
	go func() {
		select {
		case <-ctx.Done():
			j.stop()
		case <-j.done:
		}
	}()
	if sc.StopLimit == 0 {
		sc.StopLimit = DefaultTimeout
		if sc.Timeout > 0 {
			sc.StopLimit = sc.Timeout
		}
	}
	if sc.StopLimit > 0 {
		go j.watchStopped(sc.StopLimit)
	}
	return j, nil
}

// watchStopped fails the job when a rank stays stopped past limit.
func (j *Job) watchStopped(limit time.Duration) {
	tick := time.NewTicker(min(limit/4, 100*time.Millisecond))
	defer tick.Stop()
	since := make([]time.Time, len(j.cmds))
	for {
		select {
		case <-j.done:
			return
		case <-tick.C:
		}
		for r, c := range j.cmds {
			j.mu.Lock()
			exited := j.exited[r]
			j.mu.Unlock()
			if exited || !isStopped(c.Process.Pid) {
				since[r] = time.Time{}
				continue
			}
			if since[r].IsZero() {
				since[r] = time.Now()
				continue
			}
			if time.Since(since[r]) < limit {
				continue
			}
			j.mu.Lock()
			first := j.first < 0 && !j.killing
			if first {
				j.first, j.firstStopped = r, true
				j.status[r].Stopped = true
			}
			j.mu.Unlock()
			if first {
				j.failed()
			}
			return
		}
	}
}

func (j *Job) reap(r int, cmd *exec.Cmd) {
	err := cmd.Wait()
	j.mu.Lock()
	s := &j.status[r]
	s.Err, s.ExitCode = err, cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		s.Signal = ws.Signal().String()
	}
	s.Killed = j.killing && err != nil
	j.exited[r] = true
	failedFirst := err != nil && !j.killing && j.first < 0
	if failedFirst {
		j.first = r
	}
	j.left--
	last := j.left == 0
	j.mu.Unlock()
	if failedFirst {
		j.failed()
	}
	if last {
		close(j.done)
	}
}

// failed ends the job after its first failure, unless KeepGoing: at
// once, or once the others had Linger to report it themselves.
func (j *Job) failed() {
	switch {
	case j.keep:
	case j.linger <= 0:
		j.stop()
	default:
		go func() {
			select {
			case <-j.done:
			case <-time.After(j.linger):
				j.stop()
			}
		}()
	}
}

// stop kills every rank still running: SIGTERM to its process group,
// then SIGKILL after a grace. A stopped rank cannot act on SIGTERM; it is
// noted as stopped, since that is why its peers failed, and SIGKILL ends
// it all the same.
func (j *Job) stop() {
	j.stopOnce.Do(func() {
		j.mu.Lock()
		j.killing = true
		var live []*exec.Cmd
		for r, c := range j.cmds {
			if !j.exited[r] {
				live = append(live, c)
				j.status[r].Stopped = j.status[r].Stopped || isStopped(c.Process.Pid)
			}
		}
		j.mu.Unlock()
		for _, c := range live {
			signalGroup(c.Process, syscall.SIGTERM)
		}
		go func() {
			select {
			case <-j.done:
			case <-time.After(killGrace):
				for _, c := range live {
					signalGroup(c.Process, syscall.SIGKILL)
				}
			}
		}()
	})
}

// ID is the rendezvous the ranks were given (zero with NoRendezvous).
func (j *Job) ID() UniqueID { return j.id }

// Pids are the ranks' process ids, index = rank.
func (j *Job) Pids() []int {
	out := make([]int, len(j.cmds))
	for r, c := range j.cmds {
		out[r] = c.Process.Pid
	}
	return out
}

// Signal sends sig to one rank (tests kill a rank mid-collective).
func (j *Job) Signal(rank int, sig os.Signal) error {
	if rank < 0 || rank >= len(j.cmds) {
		return fmt.Errorf("bootstrap: signal rank %d of %d", rank, len(j.cmds))
	}
	return j.cmds[rank].Process.Signal(sig)
}

// Done is closed when every rank has exited.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits for every rank and returns how each ended. The error is nil
// when all exited with status 0; otherwise it names the rank that failed
// first and the ranks killed because of it.
func (j *Job) Wait() ([]RankStatus, error) {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	out := append([]RankStatus(nil), j.status...)
	var killed, failed []string
	for _, s := range out {
		switch {
		case s.Err == nil:
		case s.Killed && s.Rank != j.first:
			killed = append(killed, strconv.Itoa(s.Rank))
		case s.Rank != j.first:
			failed = append(failed, s.String())
		}
	}
	if j.first < 0 && len(failed) == 0 && len(killed) == 0 {
		return out, nil
	}
	var b strings.Builder
	b.WriteString("bootstrap: job failed")
	switch {
	case j.firstStopped:
		s := out[j.first]
		fmt.Fprintf(&b, ": rank %d (pid %d) was stopped (SIGSTOP or a debugger) and answered no one, the first to fail", s.Rank, s.Pid)
	default:
		for _, s := range out {
			if s.Stopped {
				// The others failed because this one stopped answering.
				fmt.Fprintf(&b, ": rank %d (pid %d) was stopped and answered no one", s.Rank, s.Pid)
				break
			}
		}
		if j.first >= 0 {
			fmt.Fprintf(&b, ": first %v", out[j.first])
		}
	}
	for _, f := range failed {
		b.WriteString("; ")
		b.WriteString(f)
	}
	if len(killed) > 0 {
		fmt.Fprintf(&b, "; killed: ranks %s", strings.Join(killed, ", "))
	}
	return out, errors.New(b.String())
}

// Kill stops every rank still running and waits for all of them.
func (j *Job) Kill() []RankStatus {
	if len(j.cmds) == 0 {
		return nil
	}
	j.stop()
	s, _ := j.Wait()
	return s
}
