// Command abigen writes the device-interface files of kernels/abi.go:
// kernels/include/msccl/abi.cuh and handles_check.cuh,
// kernels/abi_check.cuh and runtime/cuda/abi.h. Run it through `go
// generate ./kernels`; it finds the module root by walking up from the
// working directory to go.mod (or takes -root).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/msccl-go/msccl-go/kernels"
)

func main() {
	root := flag.String("root", "", "module root to write under (default: the go.mod above the working directory)")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	if root == "" {
		dir, err := os.Getwd()
		if err != nil {
			return err
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			up := filepath.Dir(dir)
			if up == dir {
				return errors.New("no go.mod above the working directory; pass -root")
			}
			dir = up
		}
		root = dir
	}
	return kernels.WriteGenerated(root)
}
