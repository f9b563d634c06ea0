package cudaexec

import "github.com/msccl-go/msccl-go/internal/diag"

// DiagCode gives a hang its stable code, ir.CodeWatchdog, so callers
// (msccl-bench, which stops a sweep on a hang) find it through any
// wrapping with ir.ErrorCode. The executor's other refusals carry theirs
// where they are made (diag.Errorc): sizes (stage.go), residency
// (resident.go), options (pack.go, executor.go, portcopy.go, trace.go)
// and features it lacks (tables.go).
func (h *HangError) DiagCode() string { return diag.CodeWatchdog }
