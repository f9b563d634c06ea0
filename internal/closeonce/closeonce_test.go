package closeonce

import (
	"errors"
	"sync"
	"testing"
)

func TestCloseRunsOnce(t *testing.T) {
	var mu sync.Mutex
	var closed bool
	runs := 0
	boom := errors.New("boom")
	release := func() error {
		runs++
		if !closed || mu.TryLock() {
			t.Error("release ran without closed set or without the lock held")
		}
		return boom
	}
	if err := Close(&mu, &closed, release); err != boom {
		t.Errorf("first Close = %v, want release's error", err)
	}
	if err := Close(&mu, &closed, release); err != nil || runs != 1 {
		t.Errorf("second Close = %v after %d runs of release, want nil after 1", err, runs)
	}
}
