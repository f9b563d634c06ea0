package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/size"
)

// The exports convert C arguments to Go, call the functions of api.go and
// verify.go under guard, and copy results into C memory. Each one's
// comment is its documentation for C callers (cgo does not copy comments
// into libmsccl.h).

// main is required by -buildmode=c-shared and never runs.
func main() {}

// setStr stores a malloc'd copy of s in *out (when out is not NULL).
func setStr(out **C.char, s string) {
	if out != nil {
		*out = C.CString(s)
	}
}

// finish stores the message of a failed call and returns its status.
func finish(errmsg **C.char, status int, msg string) C.int {
	if status != statusOK {
		setStr(errmsg, msg)
	}
	return C.int(status)
}

// goBytes copies n bytes at p (NULL with n 0 is an empty input). Not
// C.GoBytes, whose length is a C int: plan JSON can pass 2 GiB.
func goBytes(p *C.char, n C.size_t) []byte {
	b := make([]byte, int(n))
	if p != nil && n > 0 {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n)))
	}
	return b
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// msccl_abi_version returns the version of this ABI (signatures and JSON
// shapes); a caller written for another number must not use the library.
//
//export msccl_abi_version
func msccl_abi_version() C.int { return abiVersion }

// msccl_free frees a string or buffer the library returned. NULL is a no-op.
//
//export msccl_free
func msccl_free(p unsafe.Pointer) { C.free(p) }

// msccl_version stores "libmsccl VERSION GOVERSION" in *out.
//
//export msccl_version
func msccl_version(out **C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil {
			return invalid("msccl_version: out is NULL")
		}
		setStr(out, libVersion())
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_compile compiles the program src (srclen bytes; filename names it
// in diagnostics) with params, a JSON object of integer parameters
// ({"ranks": 8}; NULL or "" for none). On success *plan is a new handle.
// *diags (when not NULL) always receives a JSON array of diagnostics,
// warnings included: {severity, file, line, col, end_line, end_col,
// summary, detail, message}. Compile errors return MSCCL_ERR_INPUT with
// the first error (and a count) in *errmsg.
//
//export msccl_compile
func msccl_compile(filename *C.char, src *C.char, srclen C.size_t, params *C.char, plan *C.int64_t, diags **C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if plan == nil {
			return invalid("msccl_compile: plan is NULL")
		}
		*plan = 0
		if src == nil && srclen > 0 {
			return invalid("msccl_compile: src is NULL but srclen is %d", uint64(srclen))
		}
		h, ds, err := compileSource(goString(filename), goBytes(src, srclen), goString(params))
		if ds != nil {
			setStr(diags, string(encodeJSON(ds)))
		}
		*plan = C.int64_t(h)
		return err
	})
	return finish(errmsg, st, msg)
}

// msccl_plan_load decodes and validates plan JSON (data, n bytes; filename
// names it in diagnostics) into a new handle in *plan. *diags as for
// msccl_compile, with JSON paths in "path".
//
//export msccl_plan_load
func msccl_plan_load(filename *C.char, data *C.char, n C.size_t, plan *C.int64_t, diags **C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if plan == nil {
			return invalid("msccl_plan_load: plan is NULL")
		}
		*plan = 0
		if data == nil && n > 0 {
			return invalid("msccl_plan_load: data is NULL but n is %d", uint64(n))
		}
		h, ds, err := loadPlan(goString(filename), goBytes(data, n))
		if ds != nil {
			setStr(diags, string(encodeJSON(ds)))
		}
		*plan = C.int64_t(h)
		return err
	})
	return finish(errmsg, st, msg)
}

// msccl_plan_json stores the plan's JSON (MSCCL++ schema, exactly what
// msccl-compile compile writes) in *out and its length in *outlen.
//
//export msccl_plan_json
func msccl_plan_json(plan C.int64_t, out **C.char, outlen *C.size_t, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil || outlen == nil {
			return invalid("msccl_plan_json: out or outlen is NULL")
		}
		data, err := planJSON(int64(plan))
		if err != nil {
			return err
		}
		*out = (*C.char)(C.CBytes(data))
		*outlen = C.size_t(len(data))
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_plan_info stores a JSON summary of the plan in *out: name,
// collective, protocol, ranks, inplace, root, from_source, threadblocks
// (per rank) and size_rule {granularity, min, max, text, why} (null, with
// size_rule_error, when the plan serves no size).
//
//export msccl_plan_info
func msccl_plan_info(plan C.int64_t, out **C.char, errmsg **C.char) C.int {
	return infoExport("msccl_plan_info", planInfo, int64(plan), out, errmsg)
}

// infoExport is an msccl_*_info call: the JSON summary info makes of
// handle h, stored in *out.
func infoExport(name string, info func(int64) ([]byte, error), h int64, out **C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil {
			return invalid("%s: out is NULL", name)
		}
		data, err := info(h)
		if err != nil {
			return err
		}
		setStr(out, string(data))
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_verify proves the plan on the CPU executor, or with a size in
// options makes one run of it, and stores the verdict JSON in *out:
// {ok, verdict, mode, runs, findings: [diagnostic + kind], for a proven
// plan consistency: {consistent, identical, order_fixed, summary,
// reason}, and for one run size, dtype, op, launches, steps}. options is
// a JSON object (NULL or "" for the proof): size (bytes or "1MiB"),
// dtype, op, launches, ll, symbolic; for the proof sizes and
// require_consistent (refuse a proven plan whose ranks may receive
// different bits: verdict "not rank-consistent"). A failing verdict is
// MSCCL_OK: the call worked; the plan is wrong.
//
//export msccl_verify
func msccl_verify(plan C.int64_t, options *C.char, out **C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil {
			return invalid("msccl_verify: out is NULL")
		}
		data, err := verify(int64(plan), goString(options))
		if err != nil {
			return err
		}
		setStr(out, string(data))
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_select stores in *plan a new handle to the proven plan that the
// selection table (NULL or "": the library built into libmsccl) names for
// collective on ranks GPUs at size bytes.
//
//export msccl_select
func msccl_select(collective *C.char, ranks C.int64_t, size C.int64_t, table_ *C.char, plan *C.int64_t, errmsg **C.char) C.int {
	return handleExport("msccl_select", "plan", plan, errmsg, func() (int64, error) {
		return selectPlan(goString(table_), goString(collective), int64(ranks), int64(size))
	})
}

// handleExport is a call that makes a handle: open's, stored in *out
// (named outName in the message when NULL), 0 when it fails.
func handleExport(name, outName string, out *C.int64_t, errmsg **C.char, open func() (int64, error)) C.int {
	st, msg := guard(func() error {
		if out == nil {
			return invalid("%s: %s is NULL", name, outName)
		}
		*out = 0
		h, err := open()
		*out = C.int64_t(h)
		return err
	})
	return finish(errmsg, st, msg)
}

// msccl_parse_size reads a byte count the way the commands do ("4096",
// "64K", "1MiB": binary suffixes) into *out.
//
//export msccl_parse_size
func msccl_parse_size(s *C.char, out *C.int64_t, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil {
			return invalid("msccl_parse_size: out is NULL")
		}
		n, err := size.Parse(goString(s))
		if err != nil {
			return invalid("%v", err)
		}
		*out = C.int64_t(n)
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_unique_id stores in *out a new rendezvous id (text) whose rank 0
// runs on this host: hand it to every rank, which calls msccl_comm_init.
//
//export msccl_unique_id
func msccl_unique_id(out **C.char, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		if out == nil {
			return invalid("msccl_unique_id: out is NULL")
		}
		id, err := newUniqueID()
		if err != nil {
			return err
		}
		setStr(out, id)
		return nil
	})
	return finish(errmsg, st, msg)
}

// msccl_comm_init joins a job as one of its ranks on device ("cpu"; NULL
// or "" for cpu) and stores the communicator's handle in *comm. With id
// NULL or "" the job is the one the environment describes (MSCCL_*,
// torchrun, Open MPI or Slurm variables) and rank and world are ignored;
// else id is from msccl_unique_id and this is rank of world. Every rank
// calls it; it returns when all have joined (or a timeout names who did
// not). msccl_release destroys the communicator.
//
//export msccl_comm_init
func msccl_comm_init(device *C.char, id *C.char, rank C.int64_t, world C.int64_t, comm *C.int64_t, errmsg **C.char) C.int {
	return handleExport("msccl_comm_init", "comm", comm, errmsg, func() (int64, error) {
		return openComm(goString(device), goString(id), int64(rank), int64(world))
	})
}

// msccl_comm_info stores {"rank", "size", "device"} of a communicator in
// *out.
//
//export msccl_comm_info
func msccl_comm_info(comm C.int64_t, out **C.char, errmsg **C.char) C.int {
	return infoExport("msccl_comm_info", commInfo, int64(comm), out, errmsg)
}

// msccl_comm_run runs plan's collective on this rank: inbytes at in are
// the rank's input, outbytes at out receive its output (they may be the
// same memory), elements of dtype ("f32", "bf16", ...) reduced with op
// ("sum", "min", "max", "prod"; NULL for sum). The message size is
// outbytes for allgather and inbytes otherwise; a size outside the
// plan's rule runs padded to the next size it admits. Every rank runs
// the same sequence of collectives. On the cpu device in and out are
// host memory and stream must be 0; the call returns when this rank's
// part is done. On the cuda device they are device memory and the call
// is queued on stream. msccl_comm_call is the general form.
//
//export msccl_comm_run
func msccl_comm_run(comm C.int64_t, plan C.int64_t, in unsafe.Pointer, inbytes C.size_t, out unsafe.Pointer, outbytes C.size_t, dtype *C.char, op *C.char, stream C.uint64_t, errmsg **C.char) C.int {
	st, msg := guard(func() error {
		return commCall(callArgs{comm: int64(comm), plan: int64(plan), in: in, inBytes: int64(inbytes), out: out, outBytes: int64(outbytes),
			dtype: goString(dtype), op: goString(op), stream: uint64(stream)})
	})
	return finish(errmsg, st, msg)
}

// msccl_release releases a handle: a plan, or a communicator (which
// frees its buffers and leaves its job; every rank destroys its own).
// Releasing one twice is MSCCL_ERR_INVALID.
//
//export msccl_release
func msccl_release(h C.int64_t, errmsg **C.char) C.int {
	st, msg := guard(func() error { return table.release(int64(h)) })
	return finish(errmsg, st, msg)
}

// msccl_live_handles returns how many handles are not released (leak
// checks in tests).
//
//export msccl_live_handles
func msccl_live_handles() C.int64_t { return C.int64_t(table.live()) }

// msccl_selftest_panic panics inside guard, so that callers' tests can
// show a panic comes back as MSCCL_ERR_INTERNAL through the real ABI.
//
//export msccl_selftest_panic
func msccl_selftest_panic(errmsg **C.char) C.int {
	st, msg := guard(func() error { panic("selftest: a deliberate panic") })
	return finish(errmsg, st, msg)
}
