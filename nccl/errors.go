package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/runtime/bootstrap"
)

// NCCL's result codes (nccl.h: ncclResult_t).
const (
	ncclSuccess            = 0
	ncclUnhandledCudaError = 1
	ncclSystemError        = 2
	ncclInternalError      = 3
	ncclInvalidArgument    = 4
	ncclInvalidUsage       = 5
	ncclRemoteError        = 6
	ncclInProgress         = 7
)

var resultStrings = map[int]string{
	ncclSuccess:            "no error",
	ncclUnhandledCudaError: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
	ncclSystemError:        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
	ncclInternalError:      "internal error - please report this issue to the NCCL developers",
	ncclInvalidArgument:    "invalid argument (run with NCCL_DEBUG=WARN for details)",
	ncclInvalidUsage:       "invalid usage (run with NCCL_DEBUG=WARN for details)",
	ncclRemoteError:        "remote process exited or there was a network error",
	ncclInProgress:         "NCCL operation in progress",
}

// ncclError is a failure with the result code it is reported under.
type ncclError struct {
	code int
	msg  string
}

func (e *ncclError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &ncclError{code, fmt.Sprintf(format, args...)}
}

// codeOf maps an error of the root package to NCCL's codes by its code
// (ir.ErrorCode), never its text: a bad argument is ncclInvalidArgument,
// a peer that failed or a watchdog that fired ncclRemoteError.
func codeOf(err error) int {
	var ne *ncclError
	if errors.As(err, &ne) {
		return ne.code
	}
	var pe *bootstrap.PeerError
	var te *bootstrap.TimeoutError
	var pr *bootstrap.ProtocolError
	switch {
	case errors.As(err, &pe), errors.As(err, &te):
		return ncclRemoteError // a peer is gone or does not answer
	case errors.As(err, &pr), errors.Is(err, bootstrap.ErrClosed):
		return ncclInvalidUsage // ranks made different calls, or a closed communicator was used
	}
	switch ir.ErrorCode(err) {
	case ir.CodeBadOptions, ir.CodeSizeRefused:
		return ncclInvalidArgument
	case ir.CodeUnsupported:
		return ncclInvalidUsage
	case ir.CodeWatchdog, ir.CodeBroken, ir.CodeFailed:
		return ncclRemoteError
	}
	if strings.Contains(err.Error(), "cuda") {
		return ncclUnhandledCudaError
	}
	return ncclSystemError
}

// lastError is the message of the last failed call of the process, and
// per communicator (ncclGetLastError); the C strings stay valid until the
// next failure replaces them.
var lastError struct {
	mu     sync.Mutex
	global *C.char
}

// record stores err's message as the last error (of c too, when given)
// and returns its code.
func record(c *ncComm, err error) C.int {
	if err == nil {
		return ncclSuccess
	}
	code := codeOf(err)
	msg := err.Error()
	lastError.mu.Lock()
	if lastError.global != nil {
		C.free(unsafe.Pointer(lastError.global))
	}
	lastError.global = C.CString(msg)
	lastError.mu.Unlock()
	if c != nil {
		c.setLastError(msg)
		if code == ncclRemoteError {
			c.setAsync(code)
		}
	}
	if debugLevel() != "" {
		fmt.Fprintf(os.Stderr, "NCCL WARN libmsccl_nccl: %s\n", msg)
	}
	return C.int(code)
}

// guard runs f and reports its error through record; a panic becomes
// ncclInternalError with its stack, never a dead process.
func guard(c *ncComm, f func() error) (rc C.int) {
	defer func() {
		if r := recover(); r != nil {
			rc = record(c, errorf(ncclInternalError, "libmsccl_nccl: internal error (a bug; please report it): %v\n%s", r, debug.Stack()))
		}
	}()
	return record(c, f())
}

func debugLevel() string {
	v := strings.ToUpper(os.Getenv("MSCCL_DEBUG"))
	if v == "INFO" || v == "TRACE" {
		return v
	}
	return ""
}

// reasons says each distinct reason once (MSCCL_DEBUG=INFO).
var reasons sync.Map

func infoOnce(reason string) {
	if debugLevel() == "" {
		return
	}
	if _, seen := reasons.LoadOrStore(reason, true); !seen {
		fmt.Fprintf(os.Stderr, "NCCL INFO libmsccl_nccl: %s\n", reason)
	}
}
