package cudaexec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/cuda"
)

// The device placement's host side, without a GPU: the list's syntax and
// checks, which device pairs need peer access, and the refusals.

func TestParseDevices(t *testing.T) {
	for _, c := range []struct {
		spec  string
		ranks int
		want  []int
	}{
		{"0,1,2,3", 4, []int{0, 1, 2, 3}},
		{" 1, 0 ,1,0", 4, []int{1, 0, 1, 0}},
		{"2", 5, []int{0, 1, 0, 1, 0}},
		{"1", 3, []int{0, 0, 0}}, // one device: all on 0
		{"8", 2, []int{0, 1}},    // more devices than ranks: the first ones
		{"3,3", 2, []int{3, 3}},  // a list may name any ordinal; CheckDevices bounds it
		{"0,0,0,0", 4, []int{0, 0, 0, 0}},
	} {
		got, err := ParseDevices(c.spec, c.ranks)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseDevices(%q, %d) = %v, %v; want %v", c.spec, c.ranks, got, err, c.want)
		}
	}
	for _, c := range []struct {
		spec  string
		ranks int
		says  string
	}{
		{"", 2, "empty"},
		{"x", 2, "device count"},
		{"-1", 2, "device count"},
		{"0", 2, "device count"}, // a count, and no device is no placement
		{"0,1", 3, "names 2 devices for a plan of 3 ranks"},
		{"0,1,2", 2, "names 3 devices for a plan of 2 ranks"},
		{"0,a", 2, `entry 1 ("a")`},
		{"0,-1", 2, `entry 1 ("-1")`},
		{"0,,1", 3, `entry 1 ("")`},
	} {
		_, err := ParseDevices(c.spec, c.ranks)
		if err == nil || !strings.Contains(err.Error(), c.says) || ir.ErrorCode(err) != ir.CodeBadOptions {
			t.Errorf("ParseDevices(%q, %d): %v; want exec.options saying %q", c.spec, c.ranks, err, c.says)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseDevices(%q): the refusal is not one line: %q", c.spec, err)
		}
	}
}

func TestCheckDevices(t *testing.T) {
	if err := CheckDevices([]int{0, 1, 1, 0}, 4, 2); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		devs           []int
		ranks, visible int
		says           string
	}{
		{[]int{0, 2}, 2, 2, "rank 1 on device 2, but 2 device(s) are visible (0..1)"},
		{[]int{-1, 0}, 2, 8, "rank 0 on device -1"},
		{[]int{0}, 2, 8, "1 entries for a plan of 2 ranks"},
		{[]int{}, 2, 8, "0 entries for a plan of 2 ranks"},
	} {
		err := CheckDevices(c.devs, c.ranks, c.visible)
		if err == nil || !strings.Contains(err.Error(), c.says) || ir.ErrorCode(err) != ir.CodeBadOptions {
			t.Errorf("CheckDevices(%v, %d, %d): %v; want exec.options saying %q", c.devs, c.ranks, c.visible, err, c.says)
		}
	}
}

// pairsPlan has memory channels 0↔1 and 2↔3 and a port channel 1↔2.
func pairsPlan() *ir.Plan {
	p := &ir.Plan{Name: "pairs", GPUs: make([]ir.GPU, 4)}
	p.GPUs[0].Channels = []ir.Channel{{Type: ir.ChanMemory, ConnectedTo: []int{1}}}
	p.GPUs[1].Channels = []ir.Channel{{Type: ir.ChanMemory, ConnectedTo: []int{0}}, {Type: ir.ChanPort, ConnectedTo: []int{2}}}
	p.GPUs[2].Channels = []ir.Channel{{Type: ir.ChanMemory, ConnectedTo: []int{3}}, {Type: ir.ChanPort, ConnectedTo: []int{1}}}
	p.GPUs[3].Channels = []ir.Channel{{Type: ir.ChanMemory, ConnectedTo: []int{2}}}
	return p
}

func TestPeerLinks(t *testing.T) {
	p := pairsPlan()
	for _, c := range []struct {
		devs []int
		want []PeerLink
	}{
		// One device: no pair.
		{[]int{0, 0, 0, 0}, nil},
		// 0↔1 and 2↔3 stay on a device; the port channel 1↔2 crosses.
		{[]int{0, 0, 1, 1}, []PeerLink{{A: 0, B: 1, Ranks: [2]int{1, 2}}}},
		// The first rank pair is reported with the lower device's rank first.
		{[]int{1, 0, 0, 1}, []PeerLink{{A: 0, B: 1, Ranks: [2]int{1, 0}}}},
		// Devices 0-2 and 1-3 share no channel: listed, not needed.
		{[]int{0, 1, 2, 3}, []PeerLink{
			{A: 0, B: 1, Ranks: [2]int{0, 1}}, {A: 0, B: 2, Ranks: [2]int{-1, -1}}, {A: 0, B: 3, Ranks: [2]int{-1, -1}},
			{A: 1, B: 2, Ranks: [2]int{1, 2}}, {A: 1, B: 3, Ranks: [2]int{-1, -1}}, {A: 2, B: 3, Ranks: [2]int{2, 3}}}},
		// Ordinals need not be dense.
		{[]int{5, 5, 2, 2}, []PeerLink{{A: 2, B: 5, Ranks: [2]int{2, 1}}}},
	} {
		got := peerLinks(p, c.devs)
		if !slices.Equal(got, c.want) {
			t.Errorf("devices %v: %+v, want %+v", c.devs, got, c.want)
		}
	}
	// Every pair of an all-pairs plan needs peer access.
	all := rppktFanOutPlan(ir.ChanMemory)
	for _, l := range peerLinks(all, []int{0, 1, 2, 3}) {
		if !l.Needed() {
			t.Errorf("rppkt fan-out: pair %d-%d not needed", l.A, l.B)
		}
	}
}

func TestPeerRefusal(t *testing.T) {
	links := []PeerLink{
		{A: 0, B: 1, Ranks: [2]int{0, 1}, Can: true, Enabled: true},
		{A: 0, B: 2, Ranks: [2]int{-1, -1}}, // cannot, but nothing needs it
		{A: 1, B: 2, Ranks: [2]int{1, 2}},   // cannot and needed
		{A: 2, B: 3, Ranks: [2]int{2, 3}},   // cannot and needed
	}
	if err := peerRefusal("p", links[:2]); err != nil {
		t.Fatalf("refused without a needed pair lacking P2P: %v", err)
	}
	err := peerRefusal("pairs", links)
	if err == nil || ir.ErrorCode(err) != ir.CodeUnsupported {
		t.Fatalf("%v: want exec.unsupported", err)
	}
	for _, s := range []string{`plan "pairs"`, "rank 1 (device 1) and rank 2 (device 2)", "rank 2 (device 2) and rank 3 (device 3)", "P2P"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "device 0") {
		t.Errorf("%q names a pair that needs no peer access", err)
	}
	want := "0-1 p2p on (ranks 0,1); 0-2 no p2p, not needed; 1-2 no p2p (ranks 1,2); 2-3 no p2p (ranks 2,3)"
	if got := FormatPeers(links); got != want {
		t.Errorf("FormatPeers = %q, want %q", got, want)
	}
	if got := FormatPeers([]PeerLink{{A: 0, B: 1, Ranks: [2]int{-1, -1}, Can: true}}); got != "0-1 p2p off, not needed" {
		t.Errorf("FormatPeers = %q", got)
	}
	if got := FormatPeers(nil); got != "one device" {
		t.Errorf("FormatPeers(nil) = %q", got)
	}
}

// The features kept to one device are refused with their code, and only
// when the ranks are spread.
func TestSpreadRefusals(t *testing.T) {
	spread := &Executor{p: pairsPlan(), devs: &devices{of: []int{0, 0, 1, 1}, spread: true}}
	if _, err := spread.Capture(Call{Stream: &cuda.Stream{}}); ir.ErrorCode(err) != ir.CodeUnsupported || !strings.Contains(err.Error(), "CUDA graph capture") {
		t.Errorf("Capture: %v", err)
	}
	if _, err := spread.Reference("allreduce_twoshot"); ir.ErrorCode(err) != ir.CodeUnsupported || !strings.Contains(err.Error(), "[0 0 1 1]") {
		t.Errorf("Reference: %v", err)
	}
	if (&Executor{devs: &devices{of: []int{0, 0}}}).spread() || (&Executor{}).spread() || !spread.spread() {
		t.Error("spread() wrong")
	}
	if got := spread.Devices(); !slices.Equal(got, []int{0, 0, 1, 1}) {
		t.Errorf("Devices() = %v", got)
	}
	if !hasPort(pairsPlan()) || hasPort(rppktFanOutPlan(ir.ChanMemory)) || !hasPort(rppktFanOutPlan(ir.ChanPort)) {
		t.Error("hasPort wrong")
	}
	if (&Executor{}).Devices() != nil || (&Executor{}).PeerAccess() != nil {
		t.Error("the default path reports a placement")
	}
}

// Open refuses a device list of the wrong length before it needs a driver.
func TestOpenRefusesDeviceList(t *testing.T) {
	p := rppktFanOutPlan(ir.ChanMemory)
	_, err := Open(p, Options{Devices: []int{0, 1}})
	if ir.ErrorCode(err) != ir.CodeBadOptions || !strings.Contains(err.Error(), "2 entries for a plan of 4 ranks") {
		t.Fatalf("Open with 2 devices for 4 ranks: %v", err)
	}
	if _, err := Open(p, Options{Devices: []int{0, 0, -3, 0}}); ir.ErrorCode(err) != ir.CodeBadOptions {
		t.Fatalf("Open with device -3: %v", err)
	}
	// A good list gets as far as the driver.
	gpuMu.Lock()
	defer gpuMu.Unlock()
	e, err := Open(p, Options{Devices: []int{0, 0, 0, 0}})
	switch {
	case err == nil:
		e.Close()
	case !errors.Is(err, cuda.ErrNoDriver) && ir.ErrorCode(err) == ir.CodeBadOptions:
		t.Fatalf("Open with a good list: %v", err)
	}
}
