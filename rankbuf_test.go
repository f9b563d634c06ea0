package msccl

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/par"
	"github.com/msccl-go/msccl-go/ir"
)

// The device-neutral buffer calls on the cpu device, two ranks as
// goroutines of this test: SetInput checks its length, Start/Wait run
// the collective (Start is Run there), OutputOf reads this rank's and
// the peer's result, and the cuda-only calls say so.
func TestRankBuffersCPU(t *testing.T) {
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	p, err := CompileAlgorithm("", "allreduce_ring", map[string]int64{"ranks": 2})
	if err != nil {
		t.Fatal(err)
	}
	const size = 4096
	errs := par.Each(2, func(r int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rc, err := JoinComm(ctx, id, r, 2, CommOptions{Device: "cpu", Timeout: 10 * time.Second})
		if err != nil {
			return err
		}
		defer rc.Close()
		if rc.Device() != "cpu" {
			return fmt.Errorf("device %q", rc.Device())
		}
		ex, err := rc.Open(ctx, p, Options{})
		if err != nil {
			return err
		}
		defer ex.Close()
		b, err := ex.Alloc(ctx, size)
		if err != nil {
			return err
		}
		defer b.Free()
		if err := b.SetInput(make([]byte, size-4)); err == nil || !strings.Contains(err.Error(), "input of 4092 bytes, the buffers hold 4096") || ir.ErrorCode(err) != ir.CodeSizeRefused {
			return fmt.Errorf("short input: %v", err)
		}
		if err := ex.Enqueue(b, F32, Sum, 0); err == nil || !strings.Contains(err.Error(), "needs the cuda device") || ir.ErrorCode(err) != ir.CodeUnsupported {
			return fmt.Errorf("Enqueue on the cpu device: %v", err)
		}
		if err := ex.Prepare(b, F32, Sum); err != nil || b.InputPtr() != 0 || b.OutputPtr() != 0 || b.Size() != size {
			return fmt.Errorf("Prepare %v, pointers %#x %#x, size %d", err, b.InputPtr(), b.OutputPtr(), b.Size())
		}
		in := make([]byte, size)
		for i := 0; i < size; i += 4 {
			binary.LittleEndian.PutUint32(in[i:], math.Float32bits(float32(r+1)))
		}
		if err := b.SetInput(in); err != nil {
			return err
		}
		if err := ex.Start(ctx, b, F32, Sum); err != nil {
			return err
		}
		if err := ex.Wait(); err != nil {
			return err
		}
		if err := rc.Barrier(ctx); err != nil {
			return err
		}
		for q := range 2 {
			out, err := b.OutputOf(q)
			if err != nil {
				return err
			}
			for i := 0; i < size; i += 4 {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(out[i:])); v != 3 {
					return fmt.Errorf("rank %d's output element %d is %v, want 3", q, i/4, v)
				}
			}
		}
		return rc.Barrier(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
