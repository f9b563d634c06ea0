package msccl

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// proofs caches verdicts by the hash of the encoded plan: selection and
// compilation happen per call site and per size bucket, and a proof costs
// milliseconds to seconds, so the second request for the same plan must
// cost only the hash.
var proofs sync.Map // [32]byte -> error (nil: proven)

// proofsRun counts the proofs Prove actually ran (not answered from the
// cache), so tests can tell that a second request cost only the hash.
var proofsRun atomic.Int64

// Prove runs the CPU proof of p over every message size its rule admits
// (compiler.ProofSizes, compiler.ProofLaunches launches) and returns nil
// when it is correct, or an error listing the findings. A plan whose
// reduce_op fixes one reduction (`reduce ... op max`, `option reduce =
// max`) is proven for that one only, and every run path refuses the others
// (ir.Plan.FixedReduce, RunReduce); one that fixes two serves none and is
// not proven. sm may be nil
// (plans loaded from JSON); findings then name plan paths. Verdicts are
// cached by plan content.
func Prove(p *Plan, sm *compiler.SourceMap) error {
	data, err := ir.Encode(p)
	if err != nil {
		return err
	}
	key := sha256.Sum256(data)
	if v, ok := proofs.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	var perr error
	proofsRun.Add(1)
	if ds := compiler.Verify(p, sm, nil, []cpu.DType{cpu.F32}); ds.HasErrors() {
		perr = fmt.Errorf("plan %q is not proven correct:\n%w", p.Name, ds.Err())
	}
	proofs.Store(key, perr)
	return perr
}
