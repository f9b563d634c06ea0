package cudadev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/runtime/bootstrap"
	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// With this variable set the test binary is one rank of a job
// (exchangeChild, its value the IPC mode) instead of running tests.
const childRole = "MSCCL_TEST_CUDADEV_ROLE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childRole); mode != "" {
		if err := exchangeChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSelect(t *testing.T) {
	t.Setenv("MSCCL_CUDA_DEVICE", "")
	for _, c := range []struct {
		spec         string
		local, count int
		want         int
		err          string
	}{
		{"", 0, 8, 0, ""},
		{"", 7, 8, 7, ""},
		{"", 1, 1, 0, "local rank 1 has no device of its own (1 visible); set MSCCL_CUDA_DEVICE=round-robin"},
		{"", -1, 1, 0, "the local rank is unknown"},
		{"round-robin", 5, 2, 1, ""},
		{"round-robin", 3, 1, 0, ""},
		{"2", 0, 4, 2, ""},
		{"4", 0, 4, 0, "only 4 device(s) visible"},
		{"gpu1", 0, 4, 0, `"gpu1": want a device ordinal or round-robin`},
		{"", 0, 0, 0, "no CUDA device visible"},
	} {
		got, err := Select(c.spec, c.local, c.count)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Select(%q, %d, %d) = %d, %v; want an error containing %q", c.spec, c.local, c.count, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Select(%q, %d, %d) = %d, %v; want %d", c.spec, c.local, c.count, got, err, c.want)
		}
	}
	t.Setenv("MSCCL_CUDA_DEVICE", "round-robin")
	if got, err := Select("", 3, 2); err != nil || got != 1 {
		t.Errorf("MSCCL_CUDA_DEVICE=round-robin: %d, %v", got, err)
	}
}

func TestParseIPC(t *testing.T) {
	for s, want := range map[string]IPC{"": IPCAuto, "auto": IPCAuto, "legacy": IPCLegacy, "vmm": IPCVMM} {
		if got, err := ParseIPC(s); err != nil || got != want {
			t.Errorf("ParseIPC(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseIPC("nvls"); err == nil {
		t.Error("ParseIPC(nvls) succeeded")
	}
}

// Bad handles are errors naming what is wrong, and never reach the
// driver; the descriptor of a refused handle is closed.
func TestImportRefuses(t *testing.T) {
	d := openOrSkip(t, IPCAuto)
	defer d.Close()
	for _, h := range []comm.Handle{
		{FD: -1},
		{Data: []byte{9}, FD: -1},
		{Data: []byte{kindLegacy, 1, 2}, FD: -1},
		{Data: append([]byte{kindVMM}, make([]byte, 16)...), FD: -1},
	} {
		if m, err := d.Import(h); err == nil {
			m.Close()
			t.Errorf("Import(%v) succeeded", h.Data)
		}
	}
	if d.Live() != 0 {
		t.Errorf("%d live allocations after refused imports", d.Live())
	}
}

func openOrSkip(t *testing.T, mode IPC) *Device {
	t.Helper()
	if err := cuda.Init(); err != nil {
		if errors.Is(err, cuda.ErrNoDriver) {
			t.Skipf("no CUDA: %v", err)
		}
		t.Fatal(err)
	}
	d, err := Open(Options{IPC: mode})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Four processes on this machine's GPUs (round-robin, so one GPU hosts
// them all) exchange memory with each mode: each writes its rank into
// its own allocation, reads every peer's through the mapping, and closes
// everything: no allocation or descriptor left behind.
func TestExchangeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	d := openOrSkip(t, IPCAuto)
	vmm := d.IPC() == IPCVMM
	d.Close()
	modes := []string{"legacy"}
	if vmm {
		modes = append(modes, "vmm")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			var errs [4]bytes.Buffer
			job, err := bootstrap.Spawn(context.Background(), bootstrap.SpawnConfig{
				N: 4, Argv: []string{""}, Timeout: 60 * time.Second,
				RankEnv: func(int) []string { return []string{childRole + "=" + mode, "MSCCL_CUDA_DEVICE=round-robin"} },
				Stderr:  func(r int) io.Writer { return &errs[r] },
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := job.Wait(); err != nil {
				for r := range errs {
					t.Logf("rank %d: %s", r, errs[r].String())
				}
				t.Fatal(err)
			}
		})
	}
}

// exchangeChild is one rank of TestExchangeProcesses.
func exchangeChild(mode string) error {
	ipc, err := ParseIPC(mode)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cfg, err := bootstrap.FromEnv()
	if err != nil {
		return err
	}
	bs, err := bootstrap.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		bs.Close()
		return err
	}
	ord, err := Select("", cfg.LocalRank, n)
	if err != nil {
		bs.Close()
		return err
	}
	d, err := Open(Options{Ordinal: ord, IPC: ipc})
	if err != nil {
		bs.Close()
		return err
	}
	if d.IPC() != ipc {
		return fmt.Errorf("asked for %v, got %v", ipc, d.IPC())
	}
	c, err := comm.New(ctx, bs, d, comm.Options{Timeout: 20 * time.Second})
	if err != nil {
		bs.Close()
		return err
	}
	check := func() error {
		m, err := d.Alloc(3000)
		if err != nil {
			return err
		}
		pat := bytes.Repeat([]byte{byte(0x40 + c.Rank())}, 3000)
		if err := cuda.MemcpyHtoD(m.(*Memory).Ptr(), pat); err != nil {
			m.Close()
			return err
		}
		all, err := c.Exchange(ctx, m)
		if err != nil {
			m.Close()
			return err
		}
		defer func() {
			for _, x := range all {
				if x != nil {
					x.Close()
				}
			}
		}()
		// Every rank's pattern is in place before anyone reads.
		if err := c.Bootstrap().Barrier(ctx); err != nil {
			return err
		}
		got := make([]byte, 3000)
		for r, x := range all {
			if x.Size() != 3000 {
				return fmt.Errorf("rank %d's memory: %d bytes", r, x.Size())
			}
			if err := cuda.MemcpyDtoH(got, x.(*Memory).Ptr()); err != nil {
				return fmt.Errorf("reading rank %d's memory: %w", r, err)
			}
			if want := byte(0x40 + r); got[0] != want || got[2999] != want {
				return fmt.Errorf("rank %d's memory reads %#x..%#x, want %#x", r, got[0], got[2999], want)
			}
		}
		// Nobody frees before everyone has read.
		return c.Bootstrap().Barrier(ctx)
	}
	// Two rounds: the driver opens descriptors of its own on first use,
	// so leaks are counted from the end of the first round (each round
	// exports, passes and imports descriptors).
	err = check()
	fds0 := openFDs()
	if err == nil {
		err = check()
	}
	if fds := openFDs(); fds != fds0 && err == nil {
		err = fmt.Errorf("%d descriptors open after the first round, %d after the second", fds0, fds)
	}
	if e := c.Close(); err == nil {
		err = e
	}
	if n := d.Live(); n != 0 && err == nil {
		err = fmt.Errorf("%d allocations or imports still open", n)
	}
	if e := d.Close(); err == nil {
		err = e
	}
	return err
}

func openFDs() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}
