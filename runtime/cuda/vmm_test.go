package cuda

import (
	"bytes"
	"syscall"
	"testing"
)

// A VMM allocation exported as a descriptor and imported again (here in
// the same process: the driver allows it, unlike legacy IPC handles) is
// the same memory at another address; freeing the exporter's mapping
// leaves the importer's valid, since each holds a handle.
func TestVMMExportImport(t *testing.T) {
	ctx := setup(t)
	d := ctx.Device()
	ok, why, err := VMMSupported(d)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("no POSIX-fd VMM allocations: %s", why)
	}
	g, err := VMMGranularity(d)
	if err != nil || g <= 0 {
		t.Fatalf("granularity %d, %v", g, err)
	}
	a, err := VMMCreate(d, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size() != g {
		t.Errorf("1000 bytes mapped as %d, want the granularity %d", a.Size(), g)
	}
	fd, err := a.ExportFD()
	if err != nil {
		a.Free()
		t.Fatal(err)
	}
	b, err := VMMImport(d, fd, a.Size())
	syscall.Close(fd)
	if err != nil {
		a.Free()
		t.Fatal(err)
	}
	if b.Ptr() == a.Ptr() {
		t.Errorf("import mapped at the exporter's address %#x", a.Ptr())
	}
	want := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 128)
	if err := MemcpyHtoD(a.Ptr(), want); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); err == nil {
		t.Error("second Free succeeded")
	}
	got := readDevice(t, b.Ptr(), len(want))
	if !bytes.Equal(got, want) {
		t.Errorf("the importer reads %v..., want %v...", got[:8], want[:8])
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := VMMImport(d, -1, g); err == nil {
		t.Error("import of descriptor -1 succeeded")
	}
	if _, err := VMMImport(d, 0, g+1); err == nil {
		t.Error("import of a size off the granularity succeeded")
	}
}
