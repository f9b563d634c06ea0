package main

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Status codes, the return value of every export (libmsccl.h has no enum:
// cgo does not export Go constants, so the Python side repeats them and
// its tests check them against statusName).
const (
	statusOK = 0
	// statusInvalid: an argument is wrong in itself (a NULL output
	// pointer, malformed options JSON, an unknown handle, a negative size).
	statusInvalid = 1
	// statusInput: the input is well formed but has problems (compile
	// errors, an invalid plan, no plan for the size); diagnostics, where
	// the call returns any, say where.
	statusInput = 2
	// statusInternal: a bug (a recovered Go panic); the message has the
	// stack.
	statusInternal = 3
)

var statusName = map[int]string{
	statusOK:       "MSCCL_OK",
	statusInvalid:  "MSCCL_ERR_INVALID",
	statusInput:    "MSCCL_ERR_INPUT",
	statusInternal: "MSCCL_ERR_INTERNAL",
}

// apiError is an error with the status it is reported under; other
// errors are statusInput.
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
	return statusInput, err.Error()
}
