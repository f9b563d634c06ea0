package msccl

import (
	"context"
	"fmt"

	"github.com/msccl-go/msccl-go/internal/hostid"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

// NewUniqueID names a new rendezvous whose rank 0 runs on this host (a
// free port and a random secret, as text). The caller hands it to every
// rank by its own means (torch.distributed, MPI, a file) and each calls
// JoinComm with it: the NCCL ncclGetUniqueId / ncclCommInitRank pattern.
func NewUniqueID() (string, error) {
	id, err := bootstrap.NewUniqueID("")
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// JoinComm joins the rendezvous id names (from NewUniqueID, on the host
// of rank 0) as rank of world and connects this rank with the others on
// its node, like OpenComm without reading the environment. The node
// identity is the bootstrap's own (internal/hostid: MSCCL_NODE, else the
// host name with its boot id), so ranks joined here and ranks configured
// from a launcher's variables agree on who shares a node.
func JoinComm(ctx context.Context, id string, rank, world int, opt CommOptions) (*RankComm, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	uid, err := bootstrap.ParseUniqueID(id)
	if err != nil {
		return nil, err
	}
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("msccl: rank %d of world size %d: want 0 <= rank < world", rank, world)
	}
	node := hostid.Local().Node
	if node == "" {
		return nil, fmt.Errorf("msccl: no host name for the node identity (set %s)", hostid.NodeEnv)
	}
	cfg := bootstrap.Config{Rank: rank, World: world, LocalRank: -1, LocalWorld: -1, Node: node, ID: uid,
		Timeout: bootstrap.DefaultTimeout, Source: "unique id"}
	return openComm(ctx, cfg, opt)
}
