// Package hostid derives a process's node identity, the string ranks
// compare to decide whether they share a machine (memory, CUDA IPC) or
// must talk over the network. The bootstrap gathers it from every rank
// and runtime/topo reports it; both take it from here so that they agree.
package hostid

import (
	"os"
	"strings"
)

// NodeEnv overrides the identity: processes with different values are
// different nodes even on one machine (how CI and a one-GPU machine test
// the socket transport).
const NodeEnv = "MSCCL_NODE"

// ID is a node identity and what it was made from.
type ID struct {
	Node      string // what ranks compare
	Hostname  string
	BootID    string // /proc/sys/kernel/random/boot_id; "" when unreadable
	MachineID string // /etc/machine-id; "" when unreadable
	Source    string // NodeEnv, "hostname+boot_id", "hostname+machine-id" or "hostname"
}

// Local is this process's identity: MSCCL_NODE, else (like NCCL's host
// hash) the hostname and the kernel's boot id, so that a reused hostname
// on a rebooted or different machine is told apart while containers of
// one machine agree; /etc/machine-id stands in where the boot id cannot
// be read.
func Local() ID { return From(os.Getenv, os.Hostname, os.ReadFile) }

// From is Local with its sources given (tests).
func From(getenv func(string) string, hostname func() (string, error), readFile func(string) ([]byte, error)) ID {
	var h ID
	if name, err := hostname(); err == nil {
		h.Hostname = name
	}
	read := func(path string) string {
		b, err := readFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	h.BootID = read("/proc/sys/kernel/random/boot_id")
	h.MachineID = read("/etc/machine-id")
	switch {
	case strings.TrimSpace(getenv(NodeEnv)) != "":
		h.Node, h.Source = strings.TrimSpace(getenv(NodeEnv)), NodeEnv
	case h.BootID != "":
		h.Node, h.Source = h.Hostname+"/"+h.BootID, "hostname+boot_id"
	case h.MachineID != "":
		h.Node, h.Source = h.Hostname+"/"+h.MachineID, "hostname+machine-id"
	default:
		h.Node, h.Source = h.Hostname, "hostname"
	}
	return h
}
