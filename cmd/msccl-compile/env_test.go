package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnv: `env MSCCL_INCLUDE` prints a directory that holds
// msccl/msccl.cuh under the user's cache directory; `env` prints it as
// NAME=VALUE; an unknown name is a usage error.
func TestEnv(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	var out, errb bytes.Buffer
	if code := run([]string{"env", "MSCCL_INCLUDE"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	dir := strings.TrimSpace(out.String())
	if !strings.HasPrefix(dir, cache) {
		t.Errorf("include path %q is not under the cache %q", dir, cache)
	}
	for _, h := range []string{"msccl.cuh", "memory_channel.cuh", "port_channel.cuh", "handles_check.cuh"} {
		if _, err := os.Stat(filepath.Join(dir, "msccl", h)); err != nil {
			t.Error(err)
		}
	}
	out.Reset()
	if code := run([]string{"env"}, &out, &errb); code != exitOK || out.String() != "MSCCL_INCLUDE="+dir+"\n" {
		t.Errorf("env: exit %d, %q", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"env", "MSCCL_INCLUDES"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown variable "MSCCL_INCLUDES"`) {
		t.Errorf("unknown name: exit %d, %q", code, errb.String())
	}
}
