package main

import (
	"bytes"
	"strings"
	"testing"
)

// --devices' bad input ends before the GPU with one line and exit status 2.
func TestDevicesFlagErrors(t *testing.T) {
	twoshot := []string{"--algo", "allreduce_twoshot", "--algodir", lib, "--ranks", "4", "-b", "1K", "-e", "1K"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--devices", "0,1"}, `--devices: cudaexec: devices "0,1" names 2 devices for a plan of 4 ranks`},
		{[]string{"--devices", "x"}, `--devices: cudaexec: devices "x": want a device count N ≥ 1`},
		{[]string{"--devices", "0,1,z,1"}, `--devices: cudaexec: devices "0,1,z,1": entry 2 ("z") is not a device ordinal`},
		{[]string{"--devices", "2", "-G"}, "--devices 2 puts ranks on 2 devices: -G, --reference and --trace need every rank on one device"},
		{[]string{"--devices", "0,1,0,1", "--trace", "t.json"}, "--devices 0,1,0,1 puts ranks on 2 devices"},
		{[]string{"--devices", "2", "--procs", "2", "--device", "cpu"}, "--devices places ranks that share this process: it needs --device cuda without --procs or a launcher"},
	} {
		args := append(append([]string(nil), twoshot...), c.args...)
		var out bytes.Buffer
		err := run(args, &out)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("run(%q): got %v, want one line starting %q", c.args, err, c.want)
		}
		if got := exitCode(err); got != 2 {
			t.Errorf("run(%q): exit status %d, want 2", c.args, got)
		}
		if out.Len() != 0 {
			t.Errorf("run(%q) printed %q before failing", c.args, out.String())
		}
	}
}
