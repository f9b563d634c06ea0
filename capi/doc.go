// Command capi is libmsccl, the C ABI of msccl-go, built with
//
//	go build -buildmode=c-shared -o libmsccl.so ./capi
//
// which also writes libmsccl.h. It exists so that other languages (the
// Python package in python/, through ctypes) compile, prove and select
// plans without a Go toolchain at run time.
//
// The contract, which every export keeps:
//
//   - Every call returns a status (MSCCL_OK = 0, see status.go) and, when
//     it is not OK, a message in *errmsg: a NUL-terminated string the
//     library allocated and the caller frees with msccl_free. No global or
//     thread-local "last error": concurrent callers never see each other's.
//   - A Go panic inside a call is recovered and becomes MSCCL_ERR_INTERNAL
//     with the panic and its stack in the message; the host process goes on.
//   - Other errors get their status from their code (ir.ErrorCode), never
//     their text: an option the executor does not take is
//     MSCCL_ERR_INVALID, a run that failed (watchdog, a closed or broken
//     executor) MSCCL_ERR_RUN, the rest MSCCL_ERR_INPUT (statusOf).
//   - No Go pointer reaches C. Plans live in a table in this library and
//     cross the boundary as int64 handles (never 0); results are copies in
//     C memory (malloc), freed with msccl_free.
//   - Every export may be called from several threads at once: the table
//     is locked, plans are immutable once made, and each call works on its
//     own copies.
//
// The package owns the ABI only: argument decoding, the handle table and
// the JSON shapes of its results. Compiling, proving, selecting and
// running collectives are the root package's (msccl.CompileSource,
// VerifyPlan, SimulatePlan, SelectPlan, RankComm.Collective); this
// package imports only it and ir (deps_test.go), and must not grow logic
// of its own that a Go caller would miss.
package main
