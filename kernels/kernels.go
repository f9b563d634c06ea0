package kernels

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/msccl-go/msccl-go/ir"
)

// The pattern, not a list, so that the package still builds (and
// go generate can run) when the generated abi.cuh or abi_check.cuh is
// missing; Source then yields an #error that names it.
//
//go:embed *.cuh executor.cu include/msccl/*.cuh
var files embed.FS

// IncludeDir is where the device headers sit among the embedded files;
// a kernel includes them as "msccl/NAME.cuh" with IncludeDir's parent
// on its include path.
const IncludeDir = "include/msccl"

// primitives lists the device headers in the order they are concatenated:
// each uses only what the ones before it define. abi.cuh (codes) comes
// first and handles_check.cuh (the handles' layout assertions) last; both
// are generated from abi.go, layout.go and handles.go. reduce.cuh, the
// executor's reductions, sits where it did before the primitives moved
// into the headers, so the executor's PTX kept its bytes.
var primitives = []string{
	IncludeDir + "/abi.cuh", IncludeDir + "/common.cuh", "reduce.cuh", IncludeDir + "/semaphore.cuh",
	IncludeDir + "/port_channel.cuh", IncludeDir + "/packet.cuh", IncludeDir + "/device_syncer.cuh",
	IncludeDir + "/memory_channel.cuh", IncludeDir + "/handles_check.cuh",
}

// sourceOrder is the executor's translation unit: the primitives, the
// interpreter, and abi_check.cuh (its structs' layout assertions).
var sourceOrder = append(append([]string(nil), primitives...), "executor.cu", "abi_check.cuh")

var (
	srcOnce sync.Once
	src     string
)

// SourceFor returns the translation unit holding the kernel for one data type
// and LL packet width (entry point KernelName(dt, llWidth)), with the
// knobs of MSCCL_KERNEL_DEFINES (Tunables) set first; a malformed value
// is an error.
func SourceFor(dt ir.DType, llWidth int) (string, error) { return instance(dt, llWidth, "", "") }

// TraceSourceFor is SourceFor's traced instance (entry point
// KernelName(dt, llWidth) + "_trace"): compiled with MSCCL_TRACE, it
// records every op's start and end into Args.trace. The untraced instance
// does not contain that code, so tracing costs nothing when off.
func TraceSourceFor(dt ir.DType, llWidth int) (string, error) {
	return instance(dt, llWidth, "#define MSCCL_TRACE 1\n", "_trace")
}

// StageSourceFor is SourceFor's staging instance (entry point
// KernelName(dt, llWidth) + "_stage"): compiled with MSCCL_STAGE, it takes
// a Stage by value after the Args pointer and copies its spans itself, a
// prologue before the plan's ops and an epilogue after them. The other
// instances do not contain that code.
func StageSourceFor(dt ir.DType, llWidth int) (string, error) {
	return instance(dt, llWidth, "#define MSCCL_STAGE 1\n", "_stage")
}

// instance is the translation unit of one kernel instance: pre (defines
// before the knobs), the knobs, the source, and the entry point
// KernelName(dt, llWidth) + suffix.
func instance(dt ir.DType, llWidth int, pre, suffix string) (string, error) {
	name, err := KernelName(dt, llWidth)
	if err != nil {
		return "", err
	}
	defs, err := envDefines()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%s%s\nMSCCL_KERNEL(%s%s, DT_%s, %d)\n", pre, defs, Source(), name, suffix, strings.ToUpper(dt.String()), llWidth), nil
}

// Source returns the common part of every translation unit: the embedded
// files in sourceOrder.
func Source() string {
	srcOnce.Do(func() { src = Concat(sourceOrder...) })
	return src
}

// Primitives is the device headers concatenated (Concat), for sources
// built from embedded files: the executor's and executor/cuda/reference's.
func Primitives() string { return Concat(primitives...) }

// Concat joins embedded files by name, each under a banner; a missing one
// becomes an #error naming it, which NVRTC then reports (embed guarantees
// the hand-written files; only a deleted generated file can be missing,
// and go generate ./kernels restores it). The headers' own #include
// "..." and #pragma once lines are dropped: the caller concatenates what
// they name, in order, and the source needs no include path.
func Concat(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			fmt.Fprintf(&b, "#error missing embedded file kernels/%s (run go generate ./kernels)\n", n)
			continue
		}
		fmt.Fprintf(&b, "// ---- %s ----\n", n)
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if t := strings.TrimSpace(line); t == "#pragma once" || strings.HasPrefix(t, "#include \"") {
				continue
			}
			b.WriteString(line)
		}
	}
	return b.String()
}

// KernelName is the entry point for a data type and LL packet width.
func KernelName(dt ir.DType, llWidth int) (string, error) {
	if !dt.Valid() {
		return "", fmt.Errorf("data type %d is not supported", dt)
	}
	switch llWidth {
	case 8, 16:
	default:
		return "", fmt.Errorf("LL packet width must be 8 or 16 bytes, got %d", llWidth)
	}
	return fmt.Sprintf("msccl_exec_%s_ll%d", dt, llWidth), nil
}

// CompileOptions are the NVRTC options for an architecture such as
// "compute_90" or "sm_90". Fused multiply-add stays off: reductions must
// round exactly as the CPU executor does.
func CompileOptions(arch string) []string {
	return []string{"--gpu-architecture=" + arch, "--std=c++14", "--fmad=false", "-default-device"}
}
