package main

import (
	"io"
	"sync"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/ir"
)

// planEntry is what a plan handle stands for. The plan is never changed
// after it enters the table, so calls on one handle from several threads
// only read it.
type planEntry struct {
	plan *ir.Plan
	src  *msccl.SourceMap // nil for plans not compiled from source

	keyOnce sync.Once // key(): the hash of the plan's JSON, made once
	keyVal  [32]byte
	keyErr  error
}

// handles maps the integers C holds to Go values. Handles count up from 1
// and are never reused, so a stale handle is an error, not someone else's
// plan.
type handles struct {
	mu   sync.Mutex
	next int64
	m    map[int64]any
}

var table = &handles{m: map[int64]any{}}

func (t *handles) add(v any) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	t.m[t.next] = v
	return t.next
}

// get returns what h stands for when it is a T; what names T in the
// error ("plan", "communicator").
func get[T any](t *handles, h int64, what string) (T, error) {
	t.mu.Lock()
	v, ok := t.m[h]
	t.mu.Unlock()
	x, isT := v.(T)
	if !ok || !isT {
		return x, invalid("no %s with handle %d (released already, or never made)", what, h)
	}
	return x, nil
}

func (t *handles) plan(h int64) (*planEntry, error) { return get[*planEntry](t, h, "plan") }

func (t *handles) comm(h int64) (*commEntry, error) { return get[*commEntry](t, h, "communicator") }

// release removes h and closes what it stands for (a communicator leaves
// its job); the handle is gone even when closing fails.
func (t *handles) release(h int64) error {
	t.mu.Lock()
	v, ok := t.m[h]
	delete(t.m, h)
	t.mu.Unlock()
	if !ok {
		return invalid("no object with handle %d (released already, or never made)", h)
	}
	if c, ok := v.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// live counts the handles not released (tests check that nothing leaks).
func (t *handles) live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
