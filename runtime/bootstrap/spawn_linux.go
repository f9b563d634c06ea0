package bootstrap

import "syscall"

// dieWithParent has the kernel kill the child when this process dies, so
// a crashed launcher or test binary leaves no orphaned ranks behind.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
