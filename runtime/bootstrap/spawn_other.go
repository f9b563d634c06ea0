//go:build !linux

package bootstrap

import (
	"os"
	"syscall"
)

// dieWithParent: only Linux has PR_SET_PDEATHSIG; elsewhere the job's
// context and Kill are the only guards against orphans.
func dieWithParent(*syscall.SysProcAttr) {}

// signalGroup signals p alone: without Setpgid it leads no group.
func signalGroup(p *os.Process, sig syscall.Signal) { p.Signal(sig) }

// isStopped cannot tell without /proc.
func isStopped(int) bool { return false }
