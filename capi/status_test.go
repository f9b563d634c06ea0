package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

// An executor's error crosses the ABI with the status of its code,
// through any wrapping; an error without a code is an input problem.
func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		code string
		want int
	}{
		{ir.CodeBadOptions, statusInvalid},
		{ir.CodeWatchdog, statusRun},
		{ir.CodeBroken, statusRun},
		{ir.CodeFailed, statusRun},
		{ir.CodeSizeRefused, statusInput},
		{ir.CodeRanks, statusInput},
		{ir.CodeNotResident, statusInput},
		{ir.CodeUnsupported, statusInput},
		{"", statusInput},
	} {
		var err error = fmt.Errorf("no code")
		if c.code != "" {
			err = diag.Errorc(c.code, "refused")
		}
		if st, msg := guard(func() error { return fmt.Errorf("comm run: %w", err) }); st != c.want || !strings.HasSuffix(msg, err.Error()) {
			t.Errorf("code %q: %s %q, want %s", c.code, statusName[st], msg, statusName[c.want])
		}
	}
}

// The Python package repeats the statuses (cgo exports no constants):
// python/msccl/_lib.py's ERR_* must be statusName's, name for name.
func TestPythonStatuses(t *testing.T) {
	src, err := os.ReadFile("../python/msccl/_lib.py")
	if err != nil {
		t.Fatal(err)
	}
	py := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^(OK|ERR_[A-Z]+) = (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		n, _ := strconv.Atoi(m[2])
		py[n] = "MSCCL_" + m[1]
	}
	if fmt.Sprint(py) != fmt.Sprint(statusName) {
		t.Errorf("python/msccl/_lib.py has %v, capi/status.go %v", py, statusName)
	}
}
