package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	s := String("msccl-x")
	f := strings.Fields(s)
	if len(f) != 3 || f[0] != "msccl-x" || f[1] == "" || f[2] != runtime.Version() {
		t.Fatalf("String = %q, want NAME VERSION %s", s, runtime.Version())
	}
}
