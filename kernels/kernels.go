package kernels

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/msccl-go/msccl-go/ir"
)

//go:embed common.cuh reduce.cuh channels.cuh executor.cu
var files embed.FS

// sourceOrder is the order in which the files are concatenated: each one
// uses only what the ones before it define.
var sourceOrder = []string{"common.cuh", "reduce.cuh", "channels.cuh", "executor.cu"}

var (
	srcOnce sync.Once
	src     string
)

// SourceFor returns the translation unit holding the kernel for one data type
// and LL packet width (entry point KernelName(dt, llWidth)).
func SourceFor(dt DType, llWidth int) (string, error) {
	name, err := KernelName(dt, llWidth)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s\nMSCCL_KERNEL(%s, DT_%s, %d)\n", Source(), name, strings.ToUpper(dt.String()), llWidth), nil
}

// Source returns the common part of every translation unit: the generated header (op
// enum from the ir op table, channel types, struct sizes the Go encoder
// assumes) followed by the embedded files.
func Source() string {
	srcOnce.Do(func() {
		var b strings.Builder
		b.WriteString(Header())
		for _, n := range sourceOrder {
			// embed guarantees the files exist; a miss is a build defect
			// that NVRTC then reports through the #error.
			data, err := files.ReadFile(n)
			if err != nil {
				fmt.Fprintf(&b, "#error missing embedded file %s\n", n)
				continue
			}
			fmt.Fprintf(&b, "// ---- %s ----\n", n)
			b.Write(data)
		}
		b.WriteString(layoutAsserts)
		src = b.String()
	})
	return src
}

// Header is the generated prologue: one OP_<NAME> per ir op, in op-code
// order, and the channel type codes of ir.ChannelType.
func Header() string {
	var b strings.Builder
	b.WriteString("// Generated from the ir op table by kernels.Header; do not edit.\n")
	for _, in := range ir.Ops() {
		fmt.Fprintf(&b, "#define OP_%s %d\n", strings.ToUpper(in.Name), in.Code)
	}
	fmt.Fprintf(&b, "#define NUM_OPS %d\n", ir.NumOps)
	fmt.Fprintf(&b, "#define CHAN_NONE %d\n#define CHAN_MEMORY %d\n#define CHAN_PORT %d\n#define CHAN_SWITCH %d\n",
		ir.ChanNone, ir.ChanMemory, ir.ChanPort, ir.ChanSwitch)
	return b.String()
}

// layoutAsserts makes NVRTC reject a source whose structs no longer match
// the sizes and offsets the Go encoder in layout.go writes.
var layoutAsserts = fmt.Sprintf(`
// ---- layout checks against kernels/layout.go ----
static_assert(sizeof(DOp) == %d, "DOp size");
static_assert(sizeof(DRef) == %d, "DRef size");
static_assert(sizeof(TableHeader) == %d, "TableHeader size");
static_assert(sizeof(Args) == %d, "Args size");
static_assert(sizeof(MemChan) == %d, "MemChan size");
static_assert(sizeof(WatchRecord) == %d, "WatchRecord size");
static_assert(sizeof(BlockBarrier) == %d, "BlockBarrier size");
`, OpBytes, RefBytes, HeaderBytes, ArgsBytes, ChanBytes, WatchBytes, BarrierBytes)

// DType is an element type the kernel reduces. The order is the kernel's
// DT_* codes.
type DType uint8

const (
	F32 DType = iota
	F16
	BF16
	I32
	U32
	U8
	F8E4M3 // OCP FP8 E4M3, upstream's __fp8_e4m3: 4 per 32-bit word
	F8E5M2 // OCP FP8 E5M2, upstream's __fp8_e5m2: 4 per 32-bit word
)

// The names match cpu.DType's, and so do the codes: the GPU tests convert
// one into the other.
var dtypeNames = [...]string{"f32", "f16", "bf16", "i32", "u32", "u8", "f8e4m3", "f8e5m2"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "invalid"
}

// ParseDType maps "f32", "f16", "bf16", "i32", "u32", "u8", "f8e4m3",
// "f8e5m2" to a DType.
func ParseDType(s string) (DType, bool) {
	for i, n := range dtypeNames {
		if n == s {
			return DType(i), true
		}
	}
	return 0, false
}

// ReduceCode is the kernel's RED_* code of a reduce op.
func ReduceCode(op ir.ReduceOp) (uint8, error) {
	switch op {
	case ir.ReduceSum, ir.ReduceNone:
		return 0, nil
	case ir.ReduceMin:
		return 1, nil
	case ir.ReduceMax:
		return 2, nil
	case ir.ReduceProd:
		return 3, nil
	}
	return 0, fmt.Errorf("reduce op %q is not one of sum, min, max, prod", op)
}

// KernelName is the entry point for a data type and LL packet width.
func KernelName(dt DType, llWidth int) (string, error) {
	if int(dt) >= len(dtypeNames) {
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
