package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/msccl-go/msccl-go/kernels"
)

func init() {
	register("env", "print where this build's device headers are (MSCCL_INCLUDE, for nvcc -I and CuPy)", cmdEnv)
}

// cmdEnv prints the variables of this build, as `go env` does: all of
// them as NAME=VALUE, or the values of those named, one a line, so that
// `nvcc -I"$(msccl-compile env MSCCL_INCLUDE)"` works. The headers are
// written from the binary into the user's cache directory
// (kernels.IncludePath), so an installed msccl-compile needs no source
// tree.
func cmdEnv(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: msccl-compile env [NAME...]\n\nNAME is MSCCL_INCLUDE: the include directory of <msccl/msccl.cuh> (docs/primitives.md).")
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	inc, err := kernels.IncludePath()
	if err != nil {
		return errorf(stderr, "env", "%v", err)
	}
	vars := []struct{ name, value string }{{"MSCCL_INCLUDE", inc}}
	if fs.NArg() == 0 {
		for _, v := range vars {
			fmt.Fprintf(stdout, "%s=%s\n", v.name, v.value)
		}
		return exitOK
	}
	for _, name := range fs.Args() {
		found := false
		for _, v := range vars {
			if v.name == name {
				fmt.Fprintln(stdout, v.value)
				found = true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "msccl-compile env: unknown variable %q (known: MSCCL_INCLUDE)\n", name)
			return exitUsage
		}
	}
	return exitOK
}
