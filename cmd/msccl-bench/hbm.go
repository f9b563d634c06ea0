package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/msccl-go/msccl-go/executor/cuda/reference"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// --hbm answers issue 17's "HBM traffic as a fraction of the copy rate
// measured in the same run": the copy rate is timed once per run, before
// the sweep, on the GPU the ranks share; each row then divides the bytes
// its plan loads and stores (planTraffic) by the row's time.

// copyBytes and the repetitions of the copy that sets the rate: large
// enough that L2 (tens of MB) holds a negligible part of it and the
// launch cost vanishes; the 4.24 TB/s came from such a copy.
const (
	copyBytes  = int64(1) << 30
	copyWarmup = 2
	copyReps   = 10
)

// HBMRow is a row's traffic (Row.HBM).
type HBMRow struct {
	LoadBytes  int64   `json:"load_bytes"`
	StoreBytes int64   `json:"store_bytes"`
	RateGBps   float64 `json:"rate_gbps"` // (loads + stores) / the row's time
	CopyGBps   float64 `json:"copy_gbps"` // the run's device copy, read + write
	Fraction   float64 `json:"fraction_of_copy"`
	Skipped    string  `json:"skipped,omitempty"`
}

func hbmFlag(fs *flag.FlagSet, p *perfConfig) {
	fs.BoolVar(&p.hbm, "hbm", false, fmt.Sprintf("time a %s device-to-device copy (cuMemcpyAsync, %d warm-up + %d timed) before the sweep and print under each row the bytes its plan loads and stores in one collective (every rank on this one GPU, LL packets at their packet size), their rate and its fraction of the copy's read+write rate", size.Format(copyBytes), copyWarmup, copyReps))
}

// checkHBM refuses --hbm where the ranks do not share this process's GPU
// or no plan rows are printed.
func (p *perfConfig) checkHBM(c *config, pf *procFlags) error {
	switch {
	case !p.hbm:
		return nil
	case c.tune.on:
		return usagef("--hbm annotates the rows of one plan: drop --tune")
	case pf.procs > 0 || pf.perRank():
		return usagef("--hbm counts every rank's traffic on one GPU: it needs every rank in one process (--device cuda without --procs or a launcher)")
	}
	return nil
}

// measureCopy times the copy on s and returns its read+write rate in
// bytes per second.
func measureCopy(s *cuda.Stream, ev0, ev1 *cuda.Event) (float64, error) {
	src, err := cuda.Malloc(copyBytes)
	if err != nil {
		return 0, fmt.Errorf("--hbm: the copy's source: %w", err)
	}
	defer cuda.Free(src)
	dst, err := cuda.Malloc(copyBytes)
	if err != nil {
		return 0, fmt.Errorf("--hbm: the copy's destination: %w", err)
	}
	defer cuda.Free(dst)
	for i := 0; i < copyWarmup; i++ {
		if err := cuda.MemcpyAsync(dst, src, copyBytes, s); err != nil {
			return 0, err
		}
	}
	if err := ev0.Record(s); err != nil {
		return 0, err
	}
	for i := 0; i < copyReps; i++ {
		if err := cuda.MemcpyAsync(dst, src, copyBytes, s); err != nil {
			return 0, err
		}
	}
	if err := ev1.Record(s); err != nil {
		return 0, err
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := cuda.Elapsed(ev0, ev1)
	if err != nil {
		return 0, err
	}
	if ms <= 0 {
		return 0, fmt.Errorf("--hbm: the copy took %v ms", ms)
	}
	return 2 * float64(copyBytes) * copyReps / (float64(ms) / 1e3), nil
}

// hbmHeader states the run's copy rate under the table's header.
func hbmHeader(w io.Writer, rate float64) {
	fmt.Fprintf(w, "# hbm: device-to-device copy of %s, %d timed: %.2f TB/s read+write (%.2f TB/s copied); each hbm line: what the plan's ops load and store in one collective, over its time\n",
		size.Format(copyBytes), copyReps, rate/1e12, rate/2e12)
}

// hbmRow computes a timed row's traffic figures.
func hbmRow(p *ir.Plan, ll int, row *Row, copyRate float64) *HBMRow {
	t, err := planTraffic(p, row.Bytes, ll)
	if err != nil {
		return &HBMRow{CopyGBps: copyRate / 1e9, Skipped: err.Error()}
	}
	return newHBMRow(t, row.TimeUs, copyRate)
}

// refHBM is the reference kernel's row: its own count
// (reference.Kernel.Traffic) over its time.
func refHBM(name string, p *ir.Plan, msg int64, timeUs, copyRate float64) *HBMRow {
	skip := func(why string) *HBMRow { return &HBMRow{CopyGBps: copyRate / 1e9, Skipped: why} }
	k, err := reference.Lookup(name)
	if err != nil {
		return skip(err.Error())
	}
	in, _, err := p.BufferBytes(msg)
	if err != nil {
		return skip(err.Error())
	}
	l, s, ok := k.Traffic(len(p.GPUs), in)
	if !ok {
		return skip("reference " + name + " has no traffic count")
	}
	return newHBMRow(traffic{Loads: l, Stores: s}, timeUs, copyRate)
}

func newHBMRow(t traffic, timeUs, copyRate float64) *HBMRow {
	h := &HBMRow{LoadBytes: t.Loads, StoreBytes: t.Stores, CopyGBps: copyRate / 1e9}
	if timeUs > 0 {
		h.RateGBps = float64(t.total()) / (timeUs / 1e6) / 1e9
	}
	if copyRate > 0 {
		h.Fraction = h.RateGBps * 1e9 / copyRate
	}
	return h
}

// printHBM prints the row's hbm line and its reference's under it.
func printHBM(w io.Writer, row *Row) {
	hbmLine(w, "hbm", row.HBM)
	if row.Ref != nil && row.Ref.Skipped == "" {
		hbmLine(w, "reference hbm", row.Ref.HBM)
	}
}

func hbmLine(w io.Writer, label string, h *HBMRow) {
	if h == nil {
		return
	}
	if h.Skipped != "" {
		fmt.Fprintf(w, "#%12s %s not counted: %s\n", "", label, h.Skipped)
		return
	}
	fmt.Fprintf(w, "#%12s %s %.3f GB a collective (loads %.3f, stores %.3f): %.2f TB/s, hbm/copy %.2f\n",
		"", label, float64(h.LoadBytes+h.StoreBytes)/1e9, float64(h.LoadBytes)/1e9, float64(h.StoreBytes)/1e9, h.RateGBps/1e3, h.Fraction)
}
