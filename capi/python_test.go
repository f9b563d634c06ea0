package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pythonProbe succeeds when an interpreter can build and install the
// package offline: pip and setuptools, and for setuptools before 70.1 the
// wheel package (Debian's python3-pip brings python3-wheel).
const pythonProbe = `import setuptools, importlib.util as u
assert u.find_spec("pip"), "no pip"
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
assert v >= (61, 0), "setuptools %s is older than 61" % setuptools.__version__
assert v >= (70, 1) or u.find_spec("wheel"), "setuptools %s needs the wheel package" % setuptools.__version__
`

// findPython picks $MSCCL_PYTHON, else the first of python3 on PATH and
// /usr/bin/python3 that passes pythonProbe; why says what each lacked.
func findPython() (py string, why []string) {
	cands := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("MSCCL_PYTHON"); p != "" {
		cands = []string{p}
	}
	for _, c := range cands {
		path, err := exec.LookPath(c)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		out, err := exec.Command(path, "-c", pythonProbe).CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			why = append(why, fmt.Sprintf("%s: %s", path, lines[len(lines)-1]))
			continue
		}
		return path, nil
	}
	return "", why
}

// TestPython installs the package the way its README says (pip install
// --no-build-isolation, which runs the Go build of libmsccl.so) into a
// temporary target and runs python/tests against that copy: compile,
// positioned diagnostics, proofs of correct and wrong schedules (against
// the Go corpus goldens), plan JSON byte for byte against msccl-compile,
// bad input, threads, the CLI, a four-process job on the cpu device and
// examples/python; and a C program against the installed header.
func TestPython(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building libmsccl.so and the package takes a minute")
	}
	py, why := findPython()
	if py == "" {
		t.Skipf("no Python that can install the package offline (Debian: apt-get install python3-pip python3-setuptools): %s", strings.Join(why, "; "))
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the package build needs the go command: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	// pip builds in the source tree; a copy keeps build/ and egg-info out
	// of the checkout, and setup.py finds the Go source through
	// MSCCL_GO_SOURCE.
	pkg := filepath.Join(tmp, "python")
	if err := os.CopyFS(pkg, os.DirFS(filepath.Join(root, "python"))); err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(tmp, "site")
	env := append(os.Environ(), "GO="+goTool, "MSCCL_GO_SOURCE="+root, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_NO_CACHE_DIR=1", "PYTHONDONTWRITEBYTECODE=1")
	run := func(name string, dir string, env []string, args ...string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		t.Logf("%s: %.1f s", name, time.Since(start).Seconds())
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", name, err, strings.Join(args, " "), out)
		}
		return string(out)
	}
	run("pip install (Go build of libmsccl.so)", tmp, env, py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps", "--target", site, pkg)
	if _, err := os.Stat(filepath.Join(site, "msccl", "libmsccl.so")); err != nil {
		t.Fatalf("the installed package has no library: %v", err)
	}
	// The package carries the header the Go build wrote: a C caller
	// builds against it and the same library (testdata/smoke.c).
	pkgDir := filepath.Join(site, "msccl")
	if cc, err := exec.LookPath(cmp.Or(os.Getenv("CC"), "gcc")); err != nil {
		t.Logf("no C compiler (%v): the C smoke test did not run", err)
	} else {
		smoke := filepath.Join(tmp, "smoke")
		run("cc smoke.c", root, env, cc, "-Wall", "-Werror", "-o", smoke, filepath.Join("capi", "testdata", "smoke.c"),
			"-I", pkgDir, "-L", pkgDir, "-lmsccl", "-Wl,-rpath,"+pkgDir)
		if out := run("smoke", tmp, env, smoke); !strings.Contains(out, "libmsccl from C: ok") {
			t.Errorf("smoke: %s", out)
		}
	}
	compile := filepath.Join(tmp, "msccl-compile")
	run("go build msccl-compile", root, env, goTool, "build", "-o", compile, "./cmd/msccl-compile")
	var testEnv []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "MSCCL_LIBRARY=") && !strings.HasPrefix(kv, "PYTHONPATH=") {
			testEnv = append(testEnv, kv)
		}
	}
	testEnv = append(testEnv, "PYTHONPATH="+site, "MSCCL_SOURCE="+root, "MSCCL_COMPILE="+compile, "MSCCL_TEST_TARGET="+site)
	out := run("python tests", tmp, testEnv, py, "-m", "unittest", "discover", "-v", "-s", filepath.Join(root, "python", "tests"))
	t.Log(out)
	// Every test has what it needs here, so none may skip: a skip would
	// hide a test that no longer runs.
	if m := regexp.MustCompile(`(?m)^(\S+) \((\S+)\)[^\n]*\.\.\. skipped`).FindAllString(out, -1); len(m) > 0 {
		t.Errorf("python tests skipped:\n%s", strings.Join(m, "\n"))
	}
	if !bytes.Contains([]byte(out), []byte("\nOK")) {
		t.Errorf("python tests did not end with OK")
	}
}
