package ir

import "testing"

// A reference of 100 bytes at offset 1000 in windows of 32: three full
// windows, a short last one, nothing past its end; an op moves the
// smallest of its references' windows.
func TestWindow(t *testing.T) {
	for _, c := range []struct{ w, off, n int64 }{
		{0, 1000, 32}, {64, 1064, 32}, {96, 1096, 4}, {100, 1000, 0}, {128, 1000, 0},
	} {
		if off, n := Window(1000, 100, c.w, 32); off != c.off || n != c.n {
			t.Errorf("window at %d: [%d, +%d), want [%d, +%d)", c.w, off, n, c.off, c.n)
		}
	}
	size := func(n *int64) int64 { return *n }
	if n := WindowBytes([]int64{100, 90}, []int64{120}, size, 64, 32); n != 26 {
		t.Errorf("op window at 64: %d bytes, want 26 (the 90-byte source's)", n)
	}
	if n := WindowBytes([]int64{100}, []int64{40}, size, 64, 32); n != 0 {
		t.Errorf("op window past a reference's end: %d bytes, want 0", n)
	}
	if n := WindowBytes([]int64{100}, nil, size, 0, 1<<40); n != 100 {
		t.Errorf("one window of a whole reference: %d bytes, want 100", n)
	}
	// Chunks of 48 bytes (the largest of an uneven split): 3 of them in
	// windows of 32 bytes are 4.5 windows, so 5.
	l := &Layout{Align: 16, RefBytes: 160, RefChunks: 4}
	for _, c := range []struct {
		chunks, unit int
		want         int64
	}{{3, 32, 5}, {2, 32, 3}, {1, 48, 1}, {0, 32, 0}, {4, 1 << 20, 1}} {
		if got := l.PipelineIters(&IterContext{UnitSize: c.unit, NumChunks: c.chunks}); got != c.want {
			t.Errorf("%d chunks of %d bytes in windows of %d: %d iterations, want %d", c.chunks, l.MaxChunk(), c.unit, got, c.want)
		}
	}
}
