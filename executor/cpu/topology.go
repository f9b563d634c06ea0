package cpu

import (
	"bytes"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// Topology is the trace's cost model: bandwidths in GB/s (10^9 bytes per
// second, one direction, per GPU) and latencies in microseconds.
type Topology struct {
	Name            string  `yaml:"name"`
	NVLinkGBps      float64 `yaml:"nvlink_gbps"` // peer loads/stores over NVLink
	HBMGBps         float64 `yaml:"hbm_gbps"`    // local copies and reductions
	PortGBps        float64 `yaml:"port_gbps"`   // proxy-driven DMA
	SwitchGBps      float64 `yaml:"switch_gbps"` // NVLink multicast
	OpLatencyUs     float64 `yaml:"op_latency_us"`
	SignalLatencyUs float64 `yaml:"signal_latency_us"`
	PortLatencyUs   float64 `yaml:"port_latency_us"`
}

// h100 and h200 are SXM parts on NVLink 4 (900 GB/s bidirectional, so
// 450 per direction); they differ in HBM bandwidth.
var (
	h100 = Topology{Name: "h100-nvlink", NVLinkGBps: 450, HBMGBps: 3350, PortGBps: 400, SwitchGBps: 450,
		OpLatencyUs: 0.3, SignalLatencyUs: 0.8, PortLatencyUs: 3}
	h200 = Topology{Name: "h200-nvlink", NVLinkGBps: 450, HBMGBps: 4800, PortGBps: 400, SwitchGBps: 450,
		OpLatencyUs: 0.3, SignalLatencyUs: 0.8, PortLatencyUs: 3}
)

func (s *sim) topo() *Topology {
	if s.opt.Topology != nil {
		return s.opt.Topology
	}
	return &h200
}

// topologyFile is the YAML form: "base: h100" or "base: h200" picks the
// defaults that the other keys override.
type topologyFile struct {
	Base     string `yaml:"base"`
	Topology `yaml:",inline"`
}

// parseTopology reads a topology from YAML; unknown keys are errors so a
// misspelt bandwidth does not silently fall back to a default.
func parseTopology(data []byte) (*Topology, error) {
	var probe struct {
		Base string `yaml:"base"`
	}
	_ = yaml.Unmarshal(data, &probe)
	f := topologyFile{Topology: h200}
	switch probe.Base {
	case "", "h200":
	case "h100":
		f.Topology = h100
	default:
		return nil, fmt.Errorf("topology base %q: want h100 or h200", probe.Base)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err.Error() != "EOF" {
		return nil, fmt.Errorf("topology: %w", err)
	}
	t := f.Topology
	for name, v := range map[string]float64{"nvlink_gbps": t.NVLinkGBps, "hbm_gbps": t.HBMGBps, "port_gbps": t.PortGBps, "switch_gbps": t.SwitchGBps} {
		if v <= 0 {
			return nil, fmt.Errorf("topology: %s must be positive, got %g", name, v)
		}
	}
	for name, v := range map[string]float64{"op_latency_us": t.OpLatencyUs, "signal_latency_us": t.SignalLatencyUs, "port_latency_us": t.PortLatencyUs} {
		if v < 0 {
			return nil, fmt.Errorf("topology: %s must not be negative, got %g", name, v)
		}
	}
	return &t, nil
}

// LoadTopology reads a topology YAML file.
func LoadTopology(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := parseTopology(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
