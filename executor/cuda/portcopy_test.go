package cudaexec

import (
	"os"
	"path/filepath"
	"testing"
)

// resolvePortCopy needs no GPU: it decides from the option and the
// environment the driver will read.
func TestResolvePortCopy(t *testing.T) {
	for _, c := range []struct {
		opt        PortCopy
		env, conns string
		want       PortCopy
		bad        bool
	}{
		{PortCopyAuto, "", "32", PortCopySM, false},
		{PortCopyAuto, "", "1", PortCopySM, false},
		{PortCopyAuto, "", "8", PortCopySM, false},
		{PortCopyAuto, "", "", PortCopySM, false}, // an MPS client keeps the driver's default
		{PortCopyAuto, "", "many", PortCopySM, false},
		{PortCopyAuto, "proxy", "1", PortCopyProxy, false},
		{PortCopyAuto, "sm", "32", PortCopySM, false},
		{PortCopyAuto, "auto", "1", PortCopySM, false},
		{PortCopyProxy, "sm", "1", PortCopyProxy, false},
		{PortCopySM, "", "32", PortCopySM, false},
		{PortCopyAuto, "dma", "32", 0, true},
		{PortCopy(7), "", "32", 0, true},
	} {
		t.Setenv("MSCCL_PORT_COPY", c.env)
		t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", c.conns)
		got, err := resolvePortCopy(c.opt)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("opt %v, MSCCL_PORT_COPY=%q, connections %s: got %v, %v; want %v (error %v)", c.opt, c.env, c.conns, got, err, c.want, c.bad)
		}
	}
}

// An MPS client is recognised by the control daemon's pipe, before any
// context exists.
func TestMPSClient(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", dir)
	if mpsClient() {
		t.Fatal("an empty pipe directory is an MPS client")
	}
	if err := os.WriteFile(filepath.Join(dir, "control"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !mpsClient() {
		t.Fatal("a pipe directory with the control pipe is not an MPS client")
	}
}
