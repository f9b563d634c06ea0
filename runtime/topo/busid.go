package topo

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// ErrNoNVML is wrapped when libnvidia-ml cannot be loaded or initialized
// (no NVIDIA driver on this machine).
var ErrNoNVML = errors.New("topo: NVML not available")

// busID normalizes NVML's bus id ("00000000:18:00.0", upper or lower case,
// sometimes with a 4-digit domain) so ids from different calls, and from
// CUDA (PCIBusID), compare equal.
func busID(raw []int8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return NormalizeBusID(string(b))
}

// NormalizeBusID puts a PCI bus id in the form Topology uses: lower case
// with an 8-digit domain ("0000:18:00.0" -> "00000000:18:00.0").
func NormalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.IndexByte(s, ':'); i >= 0 && i < 8 && strings.Count(s, ":") == 2 {
		s = strings.Repeat("0", 8-i) + s
	}
	return s
}

// PCIBusID forms the bus id of a device from its PCI domain, bus and
// device numbers (CUDA's CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, _BUS_ID and
// _DEVICE_ID), so a CUDA device can be found in a Topology
// (Topology.GPUByBusID) whatever CUDA_VISIBLE_DEVICES renumbered.
func PCIBusID(domain, bus, device int) string {
	return fmt.Sprintf("%08x:%02x:%02x.0", domain, bus, device)
}

// maskBits lists the set bits of an NVML mask of machine words.
func maskBits(mask []uint) []int {
	var out []int
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros(word)
			out = append(out, w*bits.UintSize+b)
			word &^= 1 << b
		}
	}
	return out
}
