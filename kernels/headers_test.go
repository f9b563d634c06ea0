package kernels

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestUserHeaders compiles testdata/every_call.cu, which calls every
// device primitive, against the headers on disk (include/, as `msccl-compile
// env` hands them to nvcc) and against the same headers written out from
// the embedded copy (WriteInclude, what msccl.CompileKernel uses): the two
// must agree, and the layout asserts of handles_check.cuh run in both.
func TestUserHeaders(t *testing.T) {
	nvrtctest.Need(t)
	src, err := os.ReadFile(filepath.Join("testdata", "every_call.cu"))
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Abs("include")
	if err != nil {
		t.Fatal(err)
	}
	written, err := WriteInclude(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var ptxs []string
	for _, dir := range []string{onDisk, written} {
		opts := append(CompileOptions("compute_90"), "--include-path="+dir)
		ptx, log, err := nvrtc.Compile(string(src), "every_call.cu", opts)
		if err != nil {
			t.Fatalf("include path %s: %v\n%s", dir, err, log)
		}
		for _, ins := range []string{".entry every_call", "red.release.sys", "ld.acquire.sys", "st.volatile.global.v4", "st.volatile.global.v2", "fence.sc.sys"} {
			if !strings.Contains(string(ptx), ins) {
				t.Errorf("PTX lacks %s", ins)
			}
		}
		ptxs = append(ptxs, string(ptx))
	}
	if ptxs[0] != ptxs[1] {
		t.Error("the embedded headers compile to other PTX than the ones on disk")
	}
}

// TestHandleAssertsFail: a Go mirror that disagrees with the CUDA handle
// (a field moved) must make the kernel fail to compile, naming the field.
func TestHandleAssertsFail(t *testing.T) {
	nvrtctest.Need(t)
	type badChannel struct {
		Dst     uint64          `c:"dst"`
		Sem     SemaphoreHandle `c:"sem"`
		Src     uint64          `c:"src"`
		Packets uint64          `c:"packets"`
	}
	asserts, err := LayoutAsserts(reflect.TypeOf(badChannel{}), "msccl::MemoryChannel")
	if err != nil {
		t.Fatal(err)
	}
	inc, err := WriteInclude(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := "#include <msccl/msccl.cuh>\n" + asserts
	_, log, err := nvrtc.Compile(src, "bad.cu", append(CompileOptions("compute_90"), "--include-path="+inc))
	if err == nil {
		t.Fatal("a misplaced handle field compiled")
	}
	if !strings.Contains(log, "msccl::MemoryChannel.dst: offset differs from kernels.badChannel.Dst") {
		t.Errorf("the error does not name the field:\n%s", log)
	}
}
