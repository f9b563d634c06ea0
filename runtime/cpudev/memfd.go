package cpudev

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/msccl-go/msccl-go/runtime/comm"
)

// Device is the CPU device. The zero value is ready.
type Device struct{}

// Name is "cpu".
func (Device) Name() string { return "cpu" }

// Memory is a shared-memory mapping.
type Memory struct {
	mu   sync.Mutex
	fd   int
	b    []byte
	size int64
}

// Bytes is the mapping; it is valid until Close.
func (m *Memory) Bytes() []byte { return m.b }

// Size is the mapping's length in bytes.
func (m *Memory) Size() int64 { return m.size }

// Export hands out the descriptor (the communicator sends a copy) and the
// size.
func (m *Memory) Export() (comm.Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fd < 0 {
		return comm.Handle{}, errors.New("cpu memory already closed")
	}
	return comm.Handle{Data: binary.LittleEndian.AppendUint64(nil, uint64(m.size)), FD: m.fd}, nil
}

// Close unmaps the memory and closes its descriptor.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var err error
	if m.b != nil {
		err = syscall.Munmap(m.b)
		m.b = nil
	}
	if m.fd >= 0 {
		if e := syscall.Close(m.fd); err == nil {
			err = e
		}
		m.fd = -1
	}
	return err
}

// maxAlloc bounds one allocation (a corrupt size must not reach mmap).
const maxAlloc = 1 << 46

// Alloc creates size bytes of zeroed shared memory.
func (Device) Alloc(size int64) (comm.Memory, error) {
	if size <= 0 || size > maxAlloc {
		return nil, fmt.Errorf("cpu memory of %d bytes: want 1 to %d", size, int64(maxAlloc))
	}
	fd, err := memfd()
	if err != nil {
		return nil, err
	}
	if err := syscall.Ftruncate(fd, size); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("sizing shared memory to %d bytes: %w", size, err)
	}
	return mapFD(fd, size)
}

// Import maps a peer's memory from its handle; it owns h.FD.
func (Device) Import(h comm.Handle) (comm.Memory, error) {
	if h.FD < 0 {
		return nil, errors.New("cpu memory handle without a descriptor")
	}
	if len(h.Data) != 8 {
		syscall.Close(h.FD)
		return nil, fmt.Errorf("cpu memory handle of %d bytes, want 8", len(h.Data))
	}
	size := int64(binary.LittleEndian.Uint64(h.Data))
	var st syscall.Stat_t
	if err := syscall.Fstat(h.FD, &st); err != nil || size <= 0 || size > st.Size {
		syscall.Close(h.FD)
		return nil, fmt.Errorf("cpu memory handle says %d bytes, its descriptor holds %d", size, st.Size)
	}
	return mapFD(h.FD, size)
}

func mapFD(fd int, size int64) (*Memory, error) {
	b, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("mapping %d bytes of shared memory: %w", size, err)
	}
	return &Memory{fd: fd, b: b, size: size}, nil
}

// memfd returns an anonymous shared-memory descriptor (close-on-exec).
func memfd() (int, error) {
	name := []byte("msccl\x00")
	const mfdCloexec = 1
	fd, _, errno := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), mfdCloexec, 0)
	if errno == 0 {
		return int(fd), nil
	}
	if sysMemfdCreate != ^uintptr(0) && errno != syscall.ENOSYS && errno != syscall.EPERM {
		return -1, fmt.Errorf("memfd_create: %w", errno)
	}
	return shmFile()
}

// shmFile is memfd's fallback: a file in /dev/shm (or $TMPDIR) created
// exclusively and unlinked at once, so only the descriptor names it.
func shmFile() (int, error) {
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return -1, err
	}
	path := dir + "/msccl-" + hex.EncodeToString(rnd[:])
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("creating shared memory %s: %w", path, err)
	}
	if err := syscall.Unlink(path); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("unlinking %s: %w", path, err)
	}
	return fd, nil
}
