package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
)

func TestGuard(t *testing.T) {
	st, msg := guard(func() error { panic("boom") })
	if st != statusInternal || !strings.Contains(msg, "boom") || !strings.Contains(msg, "goroutine") {
		t.Errorf("panic: status %d (%s), message %q; want MSCCL_ERR_INTERNAL with the panic and its stack", st, statusName[st], msg)
	}
	if st, msg := guard(func() error { return nil }); st != statusOK || msg != "" {
		t.Errorf("nil error: %d %q", st, msg)
	}
	if st, _ := guard(func() error { return invalid("bad") }); st != statusInvalid {
		t.Errorf("invalid: status %d", st)
	}
	if st, msg := guard(func() error { return errors.New("input") }); st != statusInput || msg != "input" {
		t.Errorf("plain error: %d %q", st, msg)
	}
	var nilMap map[string]int
	if st, _ := guard(func() error { nilMap["x"] = 1; return nil }); st != statusInternal {
		t.Errorf("runtime error: status %d, want internal", st)
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

const ring = "../algorithms/allreduce_ring.msccl"

func compileRing(t *testing.T, params string) int64 {
	t.Helper()
	src, err := os.ReadFile(ring)
	if err != nil {
		t.Fatal(err)
	}
	h, ds, err := compileSource(ring, src, params)
	if err != nil {
		t.Fatalf("compile: %v (%v)", err, ds)
	}
	return h
}

func TestCompileAndHandles(t *testing.T) {
	before := table.live()
	h := compileRing(t, `{"ranks": 4}`)
	info, err := planInfo(h)
	if err != nil {
		t.Fatal(err)
	}
	var pi planInfoJSON
	if err := json.Unmarshal(info, &pi); err != nil {
		t.Fatal(err)
	}
	if pi.Ranks != 4 || pi.Collective != "allreduce" || !pi.FromSource || pi.SizeRule == nil || pi.SizeRule.Max != nil {
		t.Errorf("info: %s", info)
	}
	if err := table.release(h); err != nil {
		t.Fatal(err)
	}
	if err := table.release(h); err == nil || !strings.Contains(err.Error(), "released already") {
		t.Errorf("second release: %v", err)
	}
	if _, err := planJSON(h); err == nil {
		t.Error("a released handle still works")
	}
	if table.live() != before {
		t.Errorf("%d handles live, want %d", table.live(), before)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		src, params string
		status      int
		want        string
	}{
		{"collective allreduce\nparam ranks = 2\nbogus\n", "", statusInput, "<string>:3:1: error: "},
		{"collective allreduce\nparam ranks = 2\n", `{"ranks": "8"}`, statusInvalid, "parameter ranks: want an integer"},
		{"collective allreduce\nparam ranks = 2\n", `{"ranks": 1.5}`, statusInvalid, "parameter ranks: want an integer"},
		{"collective allreduce\nparam ranks = 2\n", `[1]`, statusInvalid, "want a JSON object of integers"},
		{"collective allreduce\nparam ranks = 2\n", `{"rank": 2}`, statusInput, "declares no param rank"},
	} {
		var ds []diagJSON
		st, msg := guard(func() error {
			var err error
			_, ds, err = compileSource("<string>", []byte(tc.src), tc.params)
			return err
		})
		if st != tc.status || !strings.Contains(msg, tc.want) {
			t.Errorf("%q %s: status %s, %q; want %s, %q", tc.src, tc.params, statusName[st], msg, statusName[tc.status], tc.want)
		}
		if st == statusInput && (len(ds) == 0 || ds[0].Line == 0 || ds[0].File != "<string>") {
			t.Errorf("%q: diagnostics without a position: %+v", tc.src, ds)
		}
	}
}

func TestVerifyOptions(t *testing.T) {
	h := compileRing(t, `{"ranks": 2}`)
	defer table.release(h)
	for _, tc := range []struct{ opts, want string }{
		{`{"sise": 1}`, `unknown field "sise"`},
		{`{"size": -1}`, "size must be positive"},
		{`{"size": "lots"}`, "size"},
		{`{"size": 1024, "dtype": "f99"}`, "unknown data type"},
		{`{"size": 1024, "op": "avg"}`, "unknown reduction"},
		{`{"size": 1024, "launches": -1}`, "launches must be at least 1"},
		{`{"size": 1024, "ll": 4}`, "ll must be 8 or 16"},
		{`{"op": "max"}`, "give its size too"},
		{`{"dtype": ["f32", "x"]}`, "unknown data type"},
		{`not json`, "verify options"},
	} {
		st, msg := guard(func() error { _, err := verify(h, tc.opts); return err })
		if st != statusInvalid || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: status %s, %q; want MSCCL_ERR_INVALID with %q", tc.opts, statusName[st], msg, tc.want)
		}
	}
	// A size outside the plan's rule is the input's problem, named.
	st, msg := guard(func() error { _, err := verify(h, `{"size": 1000}`); return err })
	if st != statusInput || !strings.Contains(msg, "size rule") {
		t.Errorf("size outside the rule: %s %q", statusName[st], msg)
	}
	out, err := verify(h, `{"size": "64KiB", "dtype": "bf16", "op": "min"}`)
	if err != nil {
		t.Fatal(err)
	}
	var v verdictJSON
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if !v.OK || v.Verdict != "correct" || v.Mode != "run" || v.Size != 65536 || v.DType != "bf16" || v.Op != "min" || v.Launches != 4 {
		t.Errorf("run: %s", out)
	}
}

// Calls on one plan and on the table from many goroutines (the Python
// threads' case); run with -race to see the table's locking hold.
func TestConcurrent(t *testing.T) {
	h := compileRing(t, `{"ranks": 3}`)
	defer table.release(h)
	want, err := planJSON(h)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := planJSON(h)
			if err == nil && string(got) != string(want) {
				err = errors.New("plan JSON differs between goroutines")
			}
			if err == nil {
				_, err = verify(h, `{"size": 192, "dtype": "i32"}`)
			}
			if err == nil {
				h2 := compileRing(t, `{"ranks": 2}`)
				err = table.release(h2)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLoadPlan(t *testing.T) {
	h, ds, err := loadPlan("bad.json", []byte(`{"name": 1}`))
	if err == nil || h != 0 || len(ds) == 0 || ds[0].Path != "name" || !strings.HasPrefix(ds[0].Message, "bad.json: ") {
		t.Errorf("bad plan: %d %v %+v", h, err, ds)
	}
	src := compileRing(t, `{"ranks": 2}`)
	defer table.release(src)
	data, _ := planJSON(src)
	h, _, err = loadPlan("ring.json", data)
	if err != nil {
		t.Fatal(err)
	}
	defer table.release(h)
	again, _ := planJSON(h)
	if string(again) != string(data) {
		t.Error("plan JSON changed through load")
	}
}
