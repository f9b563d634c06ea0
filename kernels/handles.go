package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"unsafe"
)

// The handles a user's kernel receives (kernels/include/msccl), mirrored
// in Go so that the host builds their bytes: the generated
// include/msccl/handles_check.cuh asserts every size and offset, nested
// members included, against these structs, the way abi_check.cuh holds
// the executor's. Every field is spelled out (no implicit padding), so
// binary.Write's little-endian image is the device layout; EncodeHandles
// checks that.

// MemoryChannelHandleBytes and PortChannelHandleBytes are the handles'
// sizes in a device array.
const (
	MemoryChannelHandleBytes = int(unsafe.Sizeof(MemoryChannelHandle{}))
	PortChannelHandleBytes   = int(unsafe.Sizeof(PortChannelHandle{}))
)

// WatchUserOp is WatchRecord.Op of a wait made by a user's kernel
// (msccl::Watch) rather than by an op of the executor's table.
const WatchUserOp = 0xffffffff

// Watch mirrors msccl::Watch: the per-block watchdog records of a user's
// kernel (mapped host memory) and the time a wait may spin.
type Watch struct {
	Records   uint64 `c:"records"`
	TimeoutNs uint64 `c:"timeoutNs"`
	Rank      uint32 `c:"rank"`
	NRecords  uint32 `c:"nrecords"`
}

// SemaphoreHandle mirrors msccl::Semaphore: a channel end's semaphore
// pair (Chan) and the watchdog of its waits.
type SemaphoreHandle struct {
	Chan  Chan  `c:"chan"`
	Watch Watch `c:"watch"`
}

// MemoryChannelHandle mirrors msccl::MemoryChannel: Dst is the peer's
// registered buffer mapped into this process, Src this rank's, Packets
// the local buffer the peer's putPackets write into.
type MemoryChannelHandle struct {
	Sem     SemaphoreHandle `c:"sem"`
	Dst     uint64          `c:"dst"`
	Src     uint64          `c:"src"`
	Packets uint64          `c:"packets"`
}

// Fifo mirrors struct Fifo (port_channel.cuh), the request queue a port
// channel pushes to.
type Fifo struct {
	Entries uint64 `c:"entries"`
	Head    uint64 `c:"head"`
	Tail    uint64 `c:"tail"`
	Flushed uint64 `c:"flushed"`
	Size    uint64 `c:"size"`
}

// PortChannelHandle mirrors msccl::PortChannel: Sem.Chan.Index is the
// channel id the proxy's FIFO requests carry; Dst and Src the buffers as
// the proxy addresses them.
type PortChannelHandle struct {
	Sem  SemaphoreHandle `c:"sem"`
	Fifo Fifo            `c:"fifo"`
	Dst  uint64          `c:"dst"`
	Src  uint64          `c:"src"`
}

// DeviceSyncerHandle mirrors msccl::DeviceSyncer (zeroed before first use).
type DeviceSyncerHandle struct {
	B BlockBarrier `c:"b"`
}

// handleStructs pairs each handle mirror with its CUDA type.
var handleStructs = []struct {
	goType reflect.Type
	c      string
}{
	{reflect.TypeOf(Watch{}), "msccl::Watch"},
	{reflect.TypeOf(SemaphoreHandle{}), "msccl::Semaphore"},
	{reflect.TypeOf(MemoryChannelHandle{}), "msccl::MemoryChannel"},
	{reflect.TypeOf(PortChannelHandle{}), "msccl::PortChannel"},
	{reflect.TypeOf(DeviceSyncerHandle{}), "msccl::DeviceSyncer"},
}

// handlesCheck renders include/msccl/handles_check.cuh.
func handlesCheck() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(generatedLine)
	b.WriteString("// handles_check.cuh: included last by msccl.cuh; NVRTC (or nvcc) rejects a kernel whose\n")
	b.WriteString("// channel handles no longer match the Go mirrors in kernels/handles.go.\n")
	b.WriteString("#pragma once\n\n")
	// Chan and BlockBarrier are asserted with the executor's structs
	// (abi_check.cuh); a user's kernel gets their offsets checked here
	// too, but only once, where they first nest.
	asserted := map[reflect.Type]bool{}
	for _, s := range handleStructs {
		a, err := layoutAsserts(s.goType, s.c, asserted)
		asserted[s.goType] = true
		if err != nil {
			return nil, err
		}
		b.WriteString(a)
	}
	return b.Bytes(), nil
}

// EncodeHandles lays out a slice of handles (MemoryChannelHandle,
// PortChannelHandle, ...) as the device array a kernel receives.
func EncodeHandles[T any](hs []T) ([]byte, error) {
	var t T
	size := reflect.TypeOf(t).Size()
	if n := binary.Size(t); n != int(size) {
		return nil, fmt.Errorf("%T: binary size %d differs from its memory size %d (implicit padding)", t, n, size)
	}
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, hs); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
