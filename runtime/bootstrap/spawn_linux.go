package bootstrap

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// dieWithParent has the kernel kill the child when this process dies, so
// a crashed launcher or test binary leaves no orphaned ranks behind, and
// makes the child lead a process group, so the job's signals reach what
// the rank started too.
func dieWithParent(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
	a.Setpgid = true
}

// signalGroup signals p's process group (p leads it).
func signalGroup(p *os.Process, sig syscall.Signal) {
	if syscall.Kill(-p.Pid, sig) != nil {
		p.Signal(sig)
	}
}

// isStopped reports whether pid is stopped (state T) or stopped under a
// tracer (t), from /proc/PID/stat.
func isStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'T' || s[i+2] == 't')
}
