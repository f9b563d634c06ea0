package closeonce

import "sync"

// Close runs release with mu held, the first time only: it sets *closed
// first (the owner's other methods read it under mu) and returns
// release's error. Once *closed is set it returns nil at once.
func Close(mu *sync.Mutex, closed *bool, release func() error) error {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return nil
	}
	*closed = true
	return release()
}
