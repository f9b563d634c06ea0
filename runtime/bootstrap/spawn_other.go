//go:build !linux

package bootstrap

import "syscall"

// dieWithParent: only Linux has PR_SET_PDEATHSIG; elsewhere the job's
// context and Kill are the only guards against orphans.
func dieWithParent(*syscall.SysProcAttr) {}
