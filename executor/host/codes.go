package host

import "github.com/msccl-go/msccl-go/internal/diag"

// DiagCode gives a hang its stable code, ir.CodeWatchdog, as the CUDA
// executor's HangError has: callers branch on ir.ErrorCode, not on the
// type of one executor.
func (h *HangError) DiagCode() string { return diag.CodeWatchdog }
