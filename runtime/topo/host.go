package topo

import (
	"fmt"
	"os"

	"github.com/msccl-go/msccl-go/internal/hostid"
)

// NodeEnv names the environment variable that overrides a process's node
// identity: processes with different values are different nodes even on
// one machine (how CI and a one-GPU machine test the socket transport),
// and processes on different machines with one value would be taken for
// one node (do not).
const NodeEnv = hostid.NodeEnv

// Host is the identity of the machine (or declared node) a process runs
// on. Two ranks are on the same node exactly when their Node strings are
// equal. The bootstrap derives the same identity (internal/hostid).
type Host struct {
	Node      string // the identity ranks compare
	Hostname  string
	BootID    string // /proc/sys/kernel/random/boot_id; "" when unreadable
	MachineID string // /etc/machine-id; "" when unreadable
	Source    string // what Node was made from: NodeEnv, "hostname+boot_id", "hostname+machine-id" or "hostname"
}

func (h Host) String() string {
	if h.Node == "" {
		return "unknown"
	}
	switch h.Source {
	case "":
		return h.Node
	case NodeEnv:
		return fmt.Sprintf("%s (from %s; hostname %s)", h.Node, NodeEnv, orNA(h.Hostname))
	}
	return fmt.Sprintf("%s (from %s; %s overrides)", h.Node, h.Source, NodeEnv)
}

// LocalHost reads this process's node identity. Like NCCL's host hash it
// is the hostname and the kernel's boot id: containers of one machine
// that share its GPUs have one boot id (CUDA IPC works between them only
// when they also share the IPC namespace, which the communicator checks
// when it opens a handle), and a reused hostname on a rebooted or
// different machine is told apart. /etc/machine-id stands in where the
// boot id cannot be read. MSCCL_NODE overrides it all.
func LocalHost() Host {
	return hostFrom(os.Getenv, os.Hostname, os.ReadFile)
}

func hostFrom(getenv func(string) string, hostname func() (string, error), readFile func(string) ([]byte, error)) Host {
	return Host(hostid.From(getenv, hostname, readFile))
}
