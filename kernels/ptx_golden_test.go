package kernels

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/fulltest"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/nvrtc"
	"github.com/msccl-go/msccl-go/runtime/nvrtc/nvrtctest"
)

// TestPTXGolden holds the executor's PTX still: the sha256 of every
// instance (each data type, both LL widths; plain, MSCCL_TRACE and
// MSCCL_STAGE) for compute_90 must match kernels/testdata/ptx.golden, which records the
// NVRTC version that produced it. A refactoring of the device headers
// (kernels/include/msccl) must leave these bytes alone; a change meant to
// alter the kernel rewrites the file (MSCCL_UPDATE_PTX=1) and is measured
// on a GPU. Another NVRTC version emits other PTX, so there the test skips.
func TestPTXGolden(t *testing.T) {
	nvrtctest.Need(t)
	fulltest.Skip(t, "compiles 48 kernel instances")
	major, minor, err := nvrtc.Version()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MSCCL_KERNEL_DEFINES", "")
	var got strings.Builder
	fmt.Fprintf(&got, "nvrtc %d.%d compute_90\n", major, minor)
	for _, dt := range ir.DTypes {
		for _, ll := range []int{8, 16} {
			for _, inst := range []struct {
				suffix string
				source func(ir.DType, int) (string, error)
			}{{"", SourceFor}, {"_trace", TraceSourceFor}, {"_stage", StageSourceFor}} {
				name, err := KernelName(dt, ll)
				if err != nil {
					t.Fatal(err)
				}
				name += inst.suffix
				src, err := inst.source(dt, ll)
				if err != nil {
					t.Fatal(err)
				}
				ptx, log, err := nvrtc.Compile(src, name+".cu", CompileOptions("compute_90"))
				if err != nil {
					t.Fatalf("%s: %v\n%s", name, err, log)
				}
				fmt.Fprintf(&got, "%x %s\n", sha256.Sum256(normalPTX(ptx)), name)
			}
		}
	}
	path := filepath.Join("testdata", "ptx.golden")
	if os.Getenv("MSCCL_UPDATE_PTX") != "" {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("nvrtc %d.%d compute_90\n", major, minor)
	if !strings.HasPrefix(string(want), head) {
		t.Skipf("%s was recorded with another NVRTC (%q); this one is %q", path, strings.SplitN(string(want), "\n", 2)[0], strings.TrimSpace(head))
	}
	if got.String() != string(want) {
		t.Errorf("executor PTX changed (MSCCL_UPDATE_PTX=1 rewrites %s once a GPU run has measured the change):\n got:\n%s\nwant:\n%s", path, got.String(), want)
	}
}

// callseq matches the comments NVRTC numbers call sites with: the counter
// is global to the process, so the same source compiled after another
// program (TestSourceForDefines' variant, in a full run of the package)
// gets other numbers in these comments and nothing else.
var callseq = regexp.MustCompile(`// callseq \d+(, \d+)?`)

// normalPTX is the PTX with NVRTC's per-process comment counters blanked,
// so the golden hashes hold whatever the test order.
func normalPTX(ptx []byte) []byte { return callseq.ReplaceAll(ptx, []byte("// callseq")) }
