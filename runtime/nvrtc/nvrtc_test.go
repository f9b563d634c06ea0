package nvrtc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// saxpy uses no CUDA header, as every kernel of this project must.
const saxpy = `
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
`

func need(t *testing.T) {
	t.Helper()
	major, minor, err := Version()
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %d.%d", major, minor)
}

func TestWantsCubin(t *testing.T) {
	for _, tc := range []struct {
		opts []string
		want bool
	}{
		{nil, false},
		{[]string{"--gpu-architecture=compute_90"}, false},
		{[]string{"--gpu-architecture=sm_90"}, true},
		{[]string{"-arch=sm_90a", "-O3"}, true},
		{[]string{"-arch", "sm_80"}, true},
		{[]string{"-arch", "compute_80"}, false},
		{[]string{"-arch"}, false},
	} {
		if got := wantsCubin(tc.opts); got != tc.want {
			t.Errorf("wantsCubin(%q) = %v, want %v", tc.opts, got, tc.want)
		}
	}
}

func TestCompile(t *testing.T) {
	need(t)
	for _, tc := range []struct {
		name    string
		opts    []string
		prefix  []byte // what the image must start with
		contain string
	}{
		{"ptx", []string{"--gpu-architecture=compute_90"}, nil, ".entry saxpy"},
		{"ptx-default-arch", nil, nil, ".entry saxpy"},
		{"cubin", []string{"--gpu-architecture=sm_90"}, []byte("\x7fELF"), "saxpy"},
	} {
		img, log, err := Compile(saxpy, "saxpy.cu", tc.opts)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !bytes.HasPrefix(img, tc.prefix) || !bytes.Contains(img, []byte(tc.contain)) {
			t.Errorf("%s: image (%d bytes) lacks %q / %q", tc.name, len(img), tc.prefix, tc.contain)
		}
		if tc.prefix == nil && bytes.IndexByte(img, 0) >= 0 {
			t.Errorf("%s: PTX text contains a NUL", tc.name)
		}
		if log != "" {
			t.Logf("%s log: %s", tc.name, log)
		}
	}
}

func TestCompileError(t *testing.T) {
	need(t)
	for _, tc := range []struct {
		name, src string
		opts      []string
		code      string
		log       string
	}{
		{"syntax", "extern \"C\" __global__ void k( { }", nil, "NVRTC_ERROR_COMPILATION", "error"},
		{"undeclared", "extern \"C\" __global__ void k() { nope(); }", nil, "NVRTC_ERROR_COMPILATION", "nope"},
		{"bad option", saxpy, []string{"--no-such-option"}, "NVRTC_ERROR_INVALID_OPTION", ""},
	} {
		_, log, err := Compile(tc.src, tc.name+".cu", tc.opts)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v is not *Error", tc.name, err)
			continue
		}
		if e.Name != tc.code || !strings.Contains(log, tc.log) || !strings.Contains(e.Error(), tc.log) {
			t.Errorf("%s: got %s with log %q", tc.name, e.Name, log)
		}
	}
}

func TestCompileCached(t *testing.T) {
	need(t)
	dir := t.TempDir()
	opts := []string{"--gpu-architecture=compute_90"}
	a, err := CompileCached(dir, saxpy, "saxpy.cu", opts)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := CacheKey(saxpy, "saxpy.cu", opts)
	path := filepath.Join(dir, key+".ptx")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no cache entry: %v", err)
	}
	// A planted entry proves the second call reads the cache.
	if err := os.WriteFile(path, []byte("cached"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := CompileCached(dir, saxpy, "saxpy.cu", opts)
	if err != nil || string(b) != "cached" {
		t.Fatalf("second call: %q, %v", b, err)
	}
	for _, other := range [][]string{{"--gpu-architecture=compute_80"}, {"--gpu-architecture=compute_90", "-DX=1"}} {
		k2, _ := CacheKey(saxpy, "saxpy.cu", other)
		if k2 == key {
			t.Errorf("options %q share the key of %q", other, opts)
		}
	}
	if k3, _ := CacheKey(saxpy+" ", "saxpy.cu", opts); k3 == key {
		t.Error("a changed source shares the key")
	}
	// An unwritable cache still yields the image.
	blocked := filepath.Join(dir, "file")
	os.WriteFile(blocked, nil, 0o644)
	c, err := CompileCached(filepath.Join(blocked, "sub"), saxpy, "saxpy.cu", opts)
	if err != nil || !bytes.Equal(c, a) {
		t.Errorf("unwritable cache: %v", err)
	}
	if _, err := CompileCached(dir, "garbage(", "bad.cu", opts); err == nil {
		t.Error("bad source compiled")
	}
}

// TestCompileAndRun compiles saxpy for the device's own architecture, both
// as PTX and as cubin, and runs it. It needs a GPU.
func TestCompileAndRun(t *testing.T) {
	need(t)
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := cuda.Device(0).PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	if err := ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	major, minor, err := cuda.Device(0).ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	x, y := make([]byte, 4*n), make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(i)))
		binary.LittleEndian.PutUint32(y[4*i:], math.Float32bits(1))
	}
	for _, arch := range []string{fmt.Sprintf("compute_%d%d", major, minor), fmt.Sprintf("sm_%d%d", major, minor)} {
		img, err := CompileCached(t.TempDir(), saxpy, "saxpy.cu", []string{"--gpu-architecture=" + arch})
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		m, err := cuda.LoadModule(img)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		f, err := m.Function("saxpy")
		if err != nil {
			t.Fatal(err)
		}
		dx, _ := cuda.Malloc(4 * n)
		dy, err := cuda.Malloc(4 * n)
		if err != nil {
			t.Fatal(err)
		}
		cuda.MemcpyHtoD(dx, x)
		cuda.MemcpyHtoD(dy, y)
		a, px, py, cnt := float32(2), uint64(dx), uint64(dy), uint32(n)
		err = f.Launch([3]uint32{(n + 127) / 128, 1, 1}, [3]uint32{128, 1, 1}, 0, nil,
			unsafe.Pointer(&a), unsafe.Pointer(&px), unsafe.Pointer(&py), unsafe.Pointer(&cnt))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 4*n)
		if err := cuda.MemcpyDtoH(out, dy); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); got != 2*float32(i)+1 {
				t.Fatalf("%s: y[%d] = %v", arch, i, got)
			}
		}
		cuda.Free(dx)
		cuda.Free(dy)
		m.Unload()
	}
}
