package msccl

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/msccl-go/msccl-go/kernels"
	"github.com/msccl-go/msccl-go/runtime/cuda"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
)

// KernelOptions configure CompileKernel.
type KernelOptions struct {
	// Arch is the NVRTC target: "sm_90" (a cubin for that GPU) or
	// "compute_90" (PTX the driver compiles at load). "" asks the driver
	// for device 0's ("sm_XY"), or, without a driver, "compute_90".
	Arch string
	// Options are further NVRTC options, e.g. "-DTILE=128".
	Options []string
}

// Kernel is a user's CUDA kernel compiled with the device headers
// (docs/primitives.md) on its include path. Its entry point must be
// extern "C" (NVRTC mangles C++ names).
type Kernel struct {
	name  string
	image []byte

	mu  sync.Mutex
	mod *cuda.Module
	fn  *cuda.Function
}

// CompileKernel compiles src with NVRTC, the headers of this build
// (kernels.IncludePath) on the include path, and returns entry name. A
// compilation error carries NVRTC's log, which names file and line.
func CompileKernel(src, name string, opt KernelOptions) (*Kernel, error) {
	if name == "" {
		return nil, fmt.Errorf("msccl: CompileKernel: no entry point name")
	}
	arch := opt.Arch
	if arch == "" {
		arch = "compute_90"
		if cuda.Init() == nil {
			if maj, min, err := cuda.Device(0).ComputeCapability(); err == nil {
				arch = fmt.Sprintf("sm_%d%d", maj, min)
			}
		}
	}
	inc, err := kernels.IncludePath()
	if err != nil {
		return nil, fmt.Errorf("msccl: CompileKernel %s: %w", name, err)
	}
	opts := append(kernels.CompileOptions(arch), "--include-path="+inc)
	opts = append(opts, opt.Options...)
	// The error of a failed compilation carries NVRTC's log; a
	// successful one's log holds only warnings.
	image, _, err := nvrtc.Compile(src, name+".cu", opts)
	if err != nil {
		return nil, fmt.Errorf("msccl: CompileKernel %s: %w", name, err)
	}
	return &Kernel{name: name, image: image}, nil
}

// IncludePath is the directory of this build's device headers
// (msccl/msccl.cuh), written out on first use: the -I for nvcc, CuPy's
// RawKernel or NVRTC when a kernel is compiled outside CompileKernel.
func IncludePath() (string, error) { return kernels.IncludePath() }

// Name is the kernel's entry point.
func (k *Kernel) Name() string { return k.name }

// Image is what NVRTC produced: PTX text, or a cubin for an sm_ Arch.
func (k *Kernel) Image() []byte { return k.image }

// Launch queues the kernel on stream (a CUstream; 0 is the legacy
// default stream) in the calling thread's current CUDA context (PyTorch's
// or CuPy's, or the one a driver call outside any context falls back to),
// loading the module there on first use. Each argument is passed by value
// as the kernel declares it: int32, uint32, int64, uint64, int (as 64
// bits), uintptr, float32, float64, bool (as one byte), a DevicePtr, a
// *Handles (its device address) or a kernels.Watch (msccl::Watch by
// value).
func (k *Kernel) Launch(stream uintptr, grid, block [3]uint32, args ...any) error {
	vals, err := kernelArgs(k.name, args)
	if err != nil {
		return err
	}
	k.mu.Lock()
	if k.fn == nil {
		mod, err := cuda.LoadModule(k.image)
		if err != nil {
			k.mu.Unlock()
			return fmt.Errorf("msccl: kernel %s: %w", k.name, err)
		}
		fn, err := mod.Function(k.name)
		if err != nil {
			mod.Unload()
			k.mu.Unlock()
			return fmt.Errorf("msccl: kernel %s: %w (is it extern \"C\"?)", k.name, err)
		}
		k.mod, k.fn = mod, fn
	}
	fn := k.fn
	k.mu.Unlock()
	ptrs := make([]unsafe.Pointer, len(vals))
	for i := range vals {
		ptrs[i] = unsafe.Pointer(&vals[i][0])
	}
	return fn.Launch(grid, block, 0, cuda.StreamOf(stream), ptrs...)
}

// kernelArgs encodes each argument's value as the bytes the kernel reads
// (little-endian, its own size); an unsupported type is an error naming
// the argument's position.
func kernelArgs(name string, args []any) ([][]byte, error) {
	out := make([][]byte, len(args))
	for i, a := range args {
		var b []byte
		switch v := a.(type) {
		case int32:
			b = binary.LittleEndian.AppendUint32(nil, uint32(v))
		case uint32:
			b = binary.LittleEndian.AppendUint32(nil, v)
		case int64:
			b = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case uint64:
			b = binary.LittleEndian.AppendUint64(nil, v)
		case int:
			b = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case uintptr:
			b = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case DevicePtr:
			b = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case float32:
			b = binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))
		case float64:
			b = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
		case bool:
			b = []byte{0}
			if v {
				b[0] = 1
			}
		case kernels.Watch:
			img, err := kernels.EncodeHandles([]kernels.Watch{v})
			if err != nil {
				return nil, err
			}
			b = img
		case *Handles:
			if v == nil || v.dev == 0 {
				return nil, fmt.Errorf("msccl: kernel %s: argument %d: handles not on a device (built on the cpu device, or closed)", name, i)
			}
			b = binary.LittleEndian.AppendUint64(nil, uint64(v.dev))
		default:
			return nil, fmt.Errorf("msccl: kernel %s: argument %d has type %T; want an integer, float, bool, DevicePtr or *Handles", name, i, a)
		}
		out[i] = b
	}
	return out, nil
}
