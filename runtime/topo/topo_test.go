package topo

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// twoPlusOne: GPU0 and GPU1 bonded by 18 NVLinks, GPU2 across the SMP link.
func twoPlusOne() *Topology {
	nv := Link{Distance: DistSys, NVLinks: 18, P2PRead: true, P2PWrite: true, Atomics: true, P2PNVLink: true}
	sys := Link{Distance: DistSys}
	self := Link{Distance: DistSelf, P2PRead: true, P2PWrite: true}
	return &Topology{
		Driver: "580.00",
		GPUs: []GPU{
			{Index: 0, Name: "NVIDIA H200", BusID: "00000000:18:00.0", NUMANode: 0, NVLinks: 18},
			{Index: 1, Name: "NVIDIA H200", BusID: "00000000:2a:00.0", NUMANode: 0, NVLinks: 18},
			{Index: 2, Name: "NVIDIA H200", BusID: "00000000:9a:00.0", NUMANode: -1},
		},
		Links: [][]Link{{self, nv, sys}, {nv, self, sys}, {sys, sys, self}},
	}
}

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		link Link
		want string
	}{
		{Link{Distance: DistSelf}, "X"},
		{Link{Distance: DistSys, NVLinks: 4}, "NV4"},
		{Link{Distance: DistNode, NVSwitch: true}, "NV"},
		{Link{Distance: DistPIX}, "PIX"},
		{Link{Distance: DistPXB}, "PXB"},
		{Link{Distance: DistPHB}, "PHB"},
		{Link{Distance: DistNode}, "NODE"},
		{Link{Distance: DistSys}, "SYS"},
		{Link{}, "?"},
		{Link{Distance: Distance(99)}, "Distance(99)"},
	} {
		if got := tc.link.Label(); got != tc.want {
			t.Errorf("%+v: label %q, want %q", tc.link, got, tc.want)
		}
	}
}

func TestQueries(t *testing.T) {
	top := twoPlusOne()
	for _, tc := range []struct {
		i, j int
		p2p  bool
	}{
		{0, 0, true}, {0, 1, true}, {1, 0, true}, {0, 2, false}, {2, 1, false}, {-1, 0, false}, {0, 7, false},
	} {
		if got := top.P2P(tc.i, tc.j); got != tc.p2p {
			t.Errorf("P2P(%d,%d) = %v", tc.i, tc.j, got)
		}
	}
	for i, want := range [][]int{{1}, {0}, nil} {
		if got := top.Peers(i); !slices.Equal(got, want) {
			t.Errorf("Peers(%d) = %v, want %v", i, got, want)
		}
	}
	if top.Peers(5) != nil {
		t.Error("Peers out of range")
	}
}

func TestString(t *testing.T) {
	got := twoPlusOne().String()
	for _, want := range []string{
		"driver 580.00, 3 GPU(s)",
		"GPU0  X     NV18  SYS   0     00000000:18:00.0  NVIDIA H200",
		"GPU2  SYS   SYS   X     N/A   00000000:9a:00.0  NVIDIA H200",
		"GPU0  X     rw    -",
		"Legend:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("String() lacks %q:\n%s", want, got)
		}
	}
	if s := (&Topology{}).String(); !strings.Contains(s, "no GPUs") {
		t.Errorf("empty topology: %q", s)
	}
}

func TestDiscover(t *testing.T) {
	top, err := Discover()
	if errors.Is(err, ErrNoNVML) {
		t.Skipf("no NVML: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", top)
	if len(top.GPUs) == 0 {
		t.Skip("NVML sees no GPU")
	}
	for i, g := range top.GPUs {
		if g.Name == "" || !strings.Contains(g.BusID, ":") {
			t.Errorf("GPU%d: %+v", i, g)
		}
		if top.Links[i][i].Label() != "X" || !top.P2P(i, i) {
			t.Errorf("GPU%d: self link %+v", i, top.Links[i][i])
		}
	}
}
