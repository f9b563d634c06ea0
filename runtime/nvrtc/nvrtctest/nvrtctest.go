package nvrtctest

import (
	"errors"
	"testing"

	"github.com/msccl-go/msccl-go/runtime/nvrtc"
)

// Need skips t when no NVRTC library loads (CI machines without CUDA)
// and fails it when one loads but does not answer: a broken install must
// not pass as a missing one.
func Need(t testing.TB) {
	t.Helper()
	if _, _, err := nvrtc.Version(); err != nil {
		if errors.Is(err, nvrtc.ErrNoNVRTC) {
			t.Skipf("NVRTC not installed: %v", err)
		}
		t.Fatal(err)
	}
}
