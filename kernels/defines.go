package kernels

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Tunables are the executor kernel's compile-time knobs that
// MSCCL_KERNEL_DEFINES may set, for measuring a variant beside the
// default in one device run (issue 17); each one's default and meaning are
// at its #ifndef in executor.cu or a header of include/msccl
// (memory_channel.cuh, semaphore.cuh). The batch and depth knobs
// change speed only (the reduction order is fixed whatever the batch);
// SIGNAL_FENCE=0 leans on the memory model and SIGNAL_SCOPE_GPU=1 on
// every peer sharing this GPU, so they are for measuring.
var Tunables = []string{"COPY_DEPTH", "RED_BATCH", "RED_BATCH_F8", "RED_LOCAL_SPANS", "SIGNAL_FENCE", "SIGNAL_SCOPE_GPU"}

// DefinesEnv names the variable: space- or comma-separated NAME=INTEGER
// items, NAME one of Tunables, for example "RED_BATCH=8 COPY_DEPTH=8".
const DefinesEnv = "MSCCL_KERNEL_DEFINES"

// maxTunable bounds every knob: they count loads in flight or are
// switches, and a larger value only makes NVRTC unroll without end.
const maxTunable = 16

// envDefines renders MSCCL_KERNEL_DEFINES as #define lines that precede
// the kernel source (so the on-disk kernel cache, keyed by the source,
// keeps variants apart). Empty when the variable is unset.
func envDefines() (string, error) {
	return parseDefines(os.Getenv(DefinesEnv))
}

func parseDefines(v string) (string, error) {
	var b strings.Builder
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return "", fmt.Errorf("%s: %q is not NAME=INTEGER (names: %s)", DefinesEnv, item, strings.Join(Tunables, ", "))
		}
		known := false
		for _, t := range Tunables {
			known = known || t == name
		}
		if !known {
			return "", fmt.Errorf("%s: unknown knob %q (have %s)", DefinesEnv, name, strings.Join(Tunables, ", "))
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > maxTunable {
			return "", fmt.Errorf("%s: %s=%q is not an integer in 0..%d", DefinesEnv, name, val, maxTunable)
		}
		fmt.Fprintf(&b, "#define %s %d\n", name, n)
	}
	return b.String(), nil
}
