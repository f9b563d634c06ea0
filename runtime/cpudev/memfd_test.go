package cpudev

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/msccl-go/msccl-go/runtime/comm"
)

// alloc allocates n bytes on the device, closed when the test ends.
func alloc(t *testing.T, n int64) comm.Memory {
	t.Helper()
	m, err := Device{}.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func dupHandle(t *testing.T, m comm.Memory) comm.Handle {
	t.Helper()
	h, err := m.Export()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(h.FD)
	if err != nil {
		t.Fatal(err)
	}
	h.FD = fd
	return h
}

// What one mapping writes the other reads: the same pages.
func TestShare(t *testing.T) {
	var d Device
	a := alloc(t, 10000)
	b, err := d.Import(dupHandle(t, a))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ab, bb := a.(*Memory).Bytes(), b.(*Memory).Bytes()
	if len(bb) != 10000 || bb[9999] != 0 {
		t.Fatalf("imported %d bytes, last %d", len(bb), bb[9999])
	}
	ab[9999] = 42
	if bb[9999] != 42 {
		t.Fatal("a write through one mapping is not seen through the other")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Export(); err == nil {
		t.Error("Export after Close succeeded")
	}
	// The pages outlive the exporter's mapping.
	if bb[9999] != 42 {
		t.Fatal("the importer lost the pages when the exporter closed")
	}
}

func TestBadHandles(t *testing.T) {
	var d Device
	a := alloc(t, 4096)
	for _, c := range []struct {
		mut  func(h *comm.Handle)
		want string
	}{
		{func(h *comm.Handle) { h.Data = h.Data[:4] }, "handle of 4 bytes, want 8"},
		{func(h *comm.Handle) { h.Data[2] = 1 }, "handle says 69632 bytes, its descriptor holds 4096"},
		{func(h *comm.Handle) { syscall.Close(h.FD); h.FD = -1 }, "without a descriptor"},
	} {
		h := dupHandle(t, a)
		c.mut(&h)
		if _, err := d.Import(h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	for _, n := range []int64{0, -1, 1 << 50} {
		if _, err := d.Alloc(n); err == nil {
			t.Errorf("Alloc(%d) succeeded", n)
		}
	}
}

// The fallback for kernels without memfd_create leaves no name behind.
func TestShmFile(t *testing.T) {
	before, _ := os.ReadDir("/dev/shm")
	fd, err := shmFile()
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir("/dev/shm")
	if len(after) != len(before) {
		t.Errorf("/dev/shm: %d entries before, %d after", len(before), len(after))
	}
	if err := syscall.Ftruncate(fd, 4096); err != nil {
		t.Fatal(err)
	}
	m, err := mapFD(fd, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m.Bytes()[0] = 1
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
