package cudaexec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// Several devices in one process (Options.Devices).
//
// The default path puts every rank on device 0 and lets every driver
// call run in runtime/cuda's fallback context. With Options.Devices set,
// rank r lives on device Devices[r]: each device's primary context is
// retained once, and every driver call that makes or uses a rank's
// streams, events, memory, kernels or launches runs inside that
// context's Do (rankRes.do), on a locked OS thread, because the fallback
// context belongs to Devices[0] alone. Kernel modules belong to a
// context, so each device loads its own (devices.fns). Ranks on distinct
// devices reach each other's buffers and semaphores through peer
// pointers, so every device pair that a memory or port channel crosses
// needs peer access: Open enables it both ways and refuses the plan,
// naming ranks and devices, where the driver says it cannot.
//
// What stays refused across distinct devices, rather than guessed at
// untested: CUDA graphs (Capture, and Run inside a caller's capture: one
// capture would span several contexts), the port proxy (its copy context
// is one device's), Reference kernels and Trace (both built for one
// device).

// devices is where Options.Devices put the ranks; nil on the default path.
type devices struct {
	of     []int                      // the device of each rank
	ctx    map[int]*cuda.Context      // each device's primary context, retained once
	sms    map[int]int                // multiprocessors per device, for the co-residency check
	fns    map[int]map[fnKey]*fnEntry // kernels per device: a module belongs to one context
	spread bool                       // ranks on more than one device
	peers  []PeerLink
}

// PeerLink is one pair of distinct devices in use, A < B.
type PeerLink struct {
	A, B int
	// Ranks is the first pair of ranks (on A, on B) that share a channel,
	// or [-1, -1] when none does: then no peer access is needed.
	Ranks [2]int
	// Can: cuDeviceCanAccessPeer holds both ways. Enabled: Open enabled
	// peer access both ways (only where a channel needs it).
	Can, Enabled bool
}

// Needed reports whether a channel crosses the pair.
func (l PeerLink) Needed() bool { return l.Ranks[0] >= 0 }

// ParseDevices reads msccl-bench's --devices: a comma-separated device
// ordinal per rank ("0,1,2,3", exactly ranks of them), or one number N,
// the count of devices that ranks are dealt onto round-robin (rank r on
// device r mod N). Ordinals are checked against the visible devices by
// CheckDevices (Open does).
func ParseDevices(spec string, ranks int) ([]int, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: empty device list")
	}
	if !strings.Contains(spec, ",") {
		n, err := strconv.Atoi(spec)
		if err != nil || n < 1 {
			return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: devices %q: want a device count N ≥ 1 or a comma-separated ordinal per rank", spec)
		}
		devs := make([]int, ranks)
		for r := range devs {
			devs[r] = r % n
		}
		return devs, nil
	}
	var devs []int
	for i, f := range strings.Split(spec, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: devices %q: entry %d (%q) is not a device ordinal", spec, i, f)
		}
		devs = append(devs, d)
	}
	if len(devs) != ranks {
		return nil, diag.Errorc(diag.CodeBadOptions, "cudaexec: devices %q names %d devices for a plan of %d ranks (one per rank, or one number N for round-robin)", spec, len(devs), ranks)
	}
	return devs, nil
}

// CheckDevices refuses a device list that does not give each of ranks
// ranks one of the visible devices.
func CheckDevices(devs []int, ranks, visible int) error {
	if len(devs) != ranks {
		return diag.Errorc(diag.CodeBadOptions, "cudaexec: Devices has %d entries for a plan of %d ranks", len(devs), ranks)
	}
	for r, d := range devs {
		if d < 0 || d >= visible {
			return diag.Errorc(diag.CodeBadOptions, "cudaexec: rank %d on device %d, but %d device(s) are visible (0..%d)", r, d, visible, visible-1)
		}
	}
	return nil
}

// peerLinks lists every pair of distinct devices in devs, each with the
// first ranks that share a memory or port channel across it (both need
// peer pointers: port channels copy by SMs here).
func peerLinks(p *ir.Plan, devs []int) []PeerLink {
	used := slices.Clone(devs)
	slices.Sort(used)
	used = slices.Compact(used)
	var links []PeerLink
	at := map[[2]int]int{}
	for i, a := range used {
		for _, b := range used[i+1:] {
			at[[2]int{a, b}] = len(links)
			links = append(links, PeerLink{A: a, B: b, Ranks: [2]int{-1, -1}})
		}
	}
	for r := range p.GPUs {
		for _, c := range p.GPUs[r].Channels {
			if c.Type != ir.ChanMemory && c.Type != ir.ChanPort {
				continue
			}
			for _, q := range c.ConnectedTo {
				if q < 0 || q >= len(devs) || devs[q] == devs[r] {
					continue
				}
				l := &links[at[[2]int{min(devs[r], devs[q]), max(devs[r], devs[q])}]]
				if l.Needed() {
					continue
				}
				l.Ranks = [2]int{r, q}
				if devs[r] != l.A {
					l.Ranks = [2]int{q, r}
				}
			}
		}
	}
	return links
}

// peerRefusal is the error for needed pairs without peer access, nil
// when there are none.
func peerRefusal(plan string, links []PeerLink) error {
	var bad []string
	for _, l := range links {
		if l.Needed() && !l.Can {
			bad = append(bad, fmt.Sprintf("rank %d (device %d) and rank %d (device %d)", l.Ranks[0], l.A, l.Ranks[1], l.B))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return diag.Errorc(diag.CodeUnsupported, "cudaexec: plan %q shares channels between devices without peer access (memory and port channels need P2P): %s; place those ranks on one device or on devices with P2P",
		plan, strings.Join(bad, "; "))
}

// FormatPeers is the peer-access matrix in one line: "0-1 p2p on (ranks 0,1)",
// "0-2 p2p off, not needed", "1-2 no p2p, not needed"; "one device" when
// there is no pair.
func FormatPeers(links []PeerLink) string {
	if len(links) == 0 {
		return "one device"
	}
	parts := make([]string, len(links))
	for i, l := range links {
		s := fmt.Sprintf("%d-%d ", l.A, l.B)
		switch {
		case !l.Can:
			s += "no p2p"
		case l.Enabled:
			s += "p2p on"
		default:
			s += "p2p off"
		}
		if l.Needed() {
			s += fmt.Sprintf(" (ranks %d,%d)", l.Ranks[0], l.Ranks[1])
		} else {
			s += ", not needed"
		}
		parts[i] = s
	}
	return strings.Join(parts, "; ")
}

// hasPort reports whether any rank of p has a port channel.
func hasPort(p *ir.Plan) bool {
	for _, g := range p.GPUs {
		for _, c := range g.Channels {
			if c.Type == ir.ChanPort && len(c.ConnectedTo) > 0 {
				return true
			}
		}
	}
	return false
}

// spreadRefusal is the error for a feature kept to one device.
func spreadRefusal(what string, devs []int) error {
	return diag.Errorc(diag.CodeUnsupported, "cudaexec: %s with ranks on several devices (%v) is not supported; place every rank on one device", what, devs)
}

// place retains each device's primary context, checks that every device
// compiles the same kernels, and enables peer access where a channel
// crosses two devices (Open, with Options.Devices; e.ctx is Devices[0]'s).
func (e *Executor) place(devs []int) error {
	d := &devices{of: devs, ctx: map[int]*cuda.Context{devs[0]: e.ctx}, sms: map[int]int{devs[0]: e.sms},
		fns: map[int]map[fnKey]*fnEntry{}}
	for _, dev := range devs {
		if d.ctx[dev] != nil {
			continue
		}
		d.spread = true
		// Retained for the process, as the default path's device 0 is:
		// a release could destroy a context other executors share.
		ctx, err := cuda.Device(dev).PrimaryContext()
		if err != nil {
			return err
		}
		arch, sms, err := deviceArch(cuda.Device(dev))
		if err != nil {
			return err
		}
		if arch != e.arch {
			// One image per executor (kernelImage): mixed architectures
			// would need one per device.
			return diag.Errorc(diag.CodeUnsupported, "cudaexec: device %d is %s and device %d %s; ranks of one executor need devices of one architecture", devs[0], e.arch, dev, arch)
		}
		d.ctx[dev], d.sms[dev] = ctx, sms
	}
	e.devs = d
	if d.spread {
		switch {
		case e.opt.PortCopy == PortCopyProxy && hasPort(e.p):
			// MSCCL_PORT_COPY=proxy means nothing to a plan without port
			// channels: no proxy starts, nothing to refuse.
			return spreadRefusal("the port proxy (PortCopyProxy)", devs)
		case e.opt.Trace > 0:
			return spreadRefusal("Trace", devs)
		}
	}
	d.peers = peerLinks(e.p, devs)
	for i := range d.peers {
		l := &d.peers[i]
		ab, err := cuda.CanAccessPeer(cuda.Device(l.A), cuda.Device(l.B))
		if err != nil {
			return err
		}
		ba, err := cuda.CanAccessPeer(cuda.Device(l.B), cuda.Device(l.A))
		if err != nil {
			return err
		}
		l.Can = ab && ba
	}
	if err := peerRefusal(e.p.Name, d.peers); err != nil {
		return err
	}
	for i := range d.peers {
		l := &d.peers[i]
		if !l.Needed() {
			continue
		}
		// Both ways: a channel's puts go one way and its signals the other.
		a, b := d.ctx[l.A], d.ctx[l.B]
		if err := a.EnablePeerAccess(b); err != nil {
			return fmt.Errorf("cudaexec: peer access device %d → %d (ranks %d, %d): %w", l.A, l.B, l.Ranks[0], l.Ranks[1], err)
		}
		if err := b.EnablePeerAccess(a); err != nil {
			return fmt.Errorf("cudaexec: peer access device %d → %d (ranks %d, %d): %w", l.B, l.A, l.Ranks[1], l.Ranks[0], err)
		}
		l.Enabled = true
	}
	return nil
}

// Devices reports the device of each rank: Options.Devices, or nil on
// the default path (every rank on device 0).
func (e *Executor) Devices() []int {
	if e.devs == nil {
		return nil
	}
	return slices.Clone(e.devs.of)
}

// PeerAccess reports every pair of distinct devices the ranks use: whether
// the driver allows peer access, whether a channel needs it and whether
// Open enabled it (FormatPeers prints it). Nil with one device.
func (e *Executor) PeerAccess() []PeerLink {
	if e.devs == nil {
		return nil
	}
	return slices.Clone(e.devs.peers)
}

// spread reports whether the ranks are on more than one device.
func (e *Executor) spread() bool { return e.devs != nil && e.devs.spread }

// do runs f in the rank's device context when the ranks were placed
// (Options.Devices), else directly, on the fallback context as before.
func (rs *rankRes) do(f func() error) error { return doIn(rs.ctx, f) }

// rankFunctions is the kernel for (dt, ll) of every rank: the one of
// device 0's context on the default path, else each device's own,
// compiled once and loaded into each device's context.
func (e *Executor) rankFunctions(dt ir.DType, ll int) ([]*fnEntry, error) {
	fns := make([]*fnEntry, len(e.ranks))
	if e.devs == nil {
		f, err := e.function(dt, ll)
		for r := range fns {
			fns[r] = f
		}
		return fns, err
	}
	var name string
	var img []byte
	for r, dev := range e.devs.of {
		m := e.devs.fns[dev]
		if m == nil {
			m = map[fnKey]*fnEntry{}
			e.devs.fns[dev] = m
		}
		if f := m[fnKey{dt, ll}]; f != nil {
			fns[r] = f
			continue
		}
		if img == nil {
			var err error
			if name, img, err = e.kernelImage(dt, ll); err != nil {
				return nil, err
			}
		}
		var f *fnEntry
		err := e.devs.ctx[dev].Do(func() error {
			var err error
			f, err = loadEntry(name, img)
			return err
		})
		if err != nil {
			return nil, err
		}
		m[fnKey{dt, ll}], fns[r] = f, f
	}
	return fns, nil
}

// unload unloads every device's kernels (Close); nil d does nothing.
func (d *devices) unload(keep func(error)) {
	if d == nil {
		return
	}
	for dev, m := range d.fns {
		for _, f := range m {
			keep(d.ctx[dev].Do(f.mod.Unload))
		}
	}
	d.fns = map[int]map[fnKey]*fnEntry{}
}
