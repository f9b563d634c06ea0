package main

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/msccl-go/msccl-go/ir"
)

// Status codes, the return value of every export (libmsccl.h has no enum:
// cgo does not export Go constants, so the Python side repeats them;
// TestPythonStatuses holds python/msccl/_lib.py to statusName). A status
// added later is an error all the same to an older caller, which reads
// anything but MSCCL_OK as one.
const (
	statusOK = 0
	// statusInvalid: an argument is wrong in itself (a NULL output
	// pointer, malformed options JSON, an unknown handle, a negative size).
	statusInvalid = 1
	// statusInput: the input is well formed but has problems (compile
	// errors, an invalid plan, no plan for the size); diagnostics, where
	// the call returns any, say where.
	statusInput = 2
	// statusInternal: a bug (a recovered Go panic, or an internal
	// compiler error); the message has the stack where there is one.
	statusInternal = 3
	// statusRun: a run failed, not its arguments: the watchdog stopped
	// a launch, the communicator or executor is closed or unusable after
	// an earlier failure, or a run failed for a reason no code names. The
	// communicator is not to be used again.
	statusRun = 4
)

var statusName = map[int]string{
	statusOK:       "MSCCL_OK",
	statusInvalid:  "MSCCL_ERR_INVALID",
	statusInput:    "MSCCL_ERR_INPUT",
	statusInternal: "MSCCL_ERR_INTERNAL",
	statusRun:      "MSCCL_ERR_RUN",
}

// statusOf is the status of an error that is not an apiError, from its
// code (ir.ErrorCode): callers across the ABI branch on statuses the way
// Go callers branch on codes, never on the message.
func statusOf(err error) int {
	switch ir.ErrorCode(err) {
	case ir.CodeBadOptions:
		return statusInvalid // a data type, reduction or option the executor does not take
	case ir.CodeWatchdog, ir.CodeBroken, ir.CodeFailed:
		return statusRun
	}
	return statusInput
}

// apiError is an error with the status it is reported under; other
// errors get their code's (statusOf).
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &apiError{statusInvalid, fmt.Sprintf(format, args...)}
}

// guard runs f, turning its error into a status and message, and a panic
// into statusInternal: a call into the library must never take the host
// process down. Panics in goroutines f starts are not caught here (Go
// cannot recover another goroutine's panic); the packages it calls keep
// their own workers panic-free on bad input, which their fuzz targets test.
func guard(f func() error) (status int, msg string) {
	defer func() {
		if r := recover(); r != nil {
			status = statusInternal
			msg = fmt.Sprintf("internal error in libmsccl (a bug; please report it with this message): %v\n%s", r, debug.Stack())
		}
	}()
	err := f()
	if err == nil {
		return statusOK, ""
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ae.msg
	}
	return statusOf(err), err.Error()
}
