package ir

import "github.com/msccl-go/msccl-go/internal/diag"

// The codes the executors' errors carry (executor/cpu, executor/cuda,
// executor/host, and the root package that runs them). Every executor
// sees ir, so the codes are named here once; a caller reads an error's
// code with ErrorCode and branches on it, never on the error's text,
// which says the same for people and may change.
const (
	CodeBadOptions  = diag.CodeBadOptions  // an option the executor does not take (data type, reduction, launches, packet width, FIFO size)
	CodeSizeRefused = diag.CodeSizeRefused // a message size the plan does not serve: outside its size rule (SizeError), or pieces of no whole elements
	CodeUnsupported = diag.CodeUnsupported // a valid plan this executor cannot run
	CodeNotResident = diag.CodeNotResident // blocks that wait on each other do not all fit on the device at once
	CodeWatchdog    = diag.CodeWatchdog    // the watchdog stopped a launch (the executors' HangError)
	CodeBroken      = diag.CodeBroken      // the executor is closed or its buffers freed, or it is unusable after an earlier failure
	CodeRanks       = diag.CodeRanks       // the plan is for another number of ranks than the job, or than the buffers given
	CodeCannotRun   = diag.CodeCannotRun   // the CPU executor cannot run the plan, for a reason none of the above names
	CodeFailed      = diag.CodeFailed      // what msccl-bench --json reports for a failure without a code (a file, a driver call, a peer)
)

// ErrorCode is the code err carries through any wrapping (fmt.Errorf's
// %w), or "" when it carries none: one of the codes above for an
// executor's error, the first error's code for Diagnostics as an error
// (DiagError).
func ErrorCode(err error) string { return diag.CodeOf(err) }

// DiagCode makes a size outside the rule a CodeSizeRefused error.
func (e *SizeError) DiagCode() string { return diag.CodeSizeRefused }
