package cuda

/*
#include "shim.h"
*/
import "C"

// CtxSynchronize waits for all work of the calling thread's current (or
// the fallback) context: every stream's, the caller's own included.
func CtxSynchronize() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuCtxSynchronize", C.mc_cuCtxSynchronize())
}
