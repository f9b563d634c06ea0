package cudaexec

import (
	"fmt"

	"github.com/msccl-go/msccl-go/runtime/comm"
	"github.com/msccl-go/msccl-go/runtime/cudadev"
)

// mappingOf describes how this process reaches m, for reports of the
// tests that run every rank in one process: a rank whose peers never see
// its signals or data is told apart from one whose peers map other
// memory by the addresses.
func mappingOf(m comm.Memory) string {
	if m == nil {
		return "not mapped (another node)"
	}
	if cm, ok := m.(*cudadev.Memory); ok {
		return cm.Mapping()
	}
	return fmt.Sprintf("%T of %d bytes", m, m.Size())
}

// Mappings lists, by rank, how this process reaches each rank's buffers
// (own, an alias of an allocation of this process, or an import) and at
// which address.
func (b *RankBuffers) Mappings() []string {
	out := make([]string, len(b.mems))
	for r, m := range b.mems {
		out[r] = fmt.Sprintf("rank %d buffers: %s", r, mappingOf(m))
	}
	return out
}

// SyncMappings lists, by rank, how this process reaches each rank's sync
// region (the semaphore words its channels signal).
func (e *RankExecutor) SyncMappings() []string {
	if e.conns == nil {
		return nil
	}
	out := make([]string, len(e.conns.Sync))
	for r, m := range e.conns.Sync {
		out[r] = fmt.Sprintf("rank %d sync region: %s", r, mappingOf(m))
	}
	return out
}
