// A C caller of libmsccl: builds against the generated libmsccl.h and
// checks the contract from C (statuses, library-owned strings freed with
// msccl_free, handles). capi/python_test.go compiles and runs it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libmsccl.h"

static int failed = 0;
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); failed = 1; } } while (0)

static const char *ring =
    "collective allreduce chunks ranks inplace\n"
    "param ranks = 3\n"
    "for s in 0..ranks - 1 {\n"
    "  for r in 0..ranks {\n"
    "    let c = (r - s - 1) % ranks\n"
    "    let nx = (r + 1) % ranks\n"
    "    copy rank(r).input[c] -> rank(nx).scratch[c]\n"
    "    reduce rank(nx).input[c], rank(nx).scratch[c] -> rank(nx).input[c]\n"
    "  }\n"
    "}\n"
    "for s in 0..ranks - 1 {\n"
    "  for r in 0..ranks {\n"
    "    let c = (r - s) % ranks\n"
    "    copy rank(r).input[c] -> rank((r + 1) % ranks).input[c]\n"
    "  }\n"
    "}\n";

int main(void) {
    char *out = NULL, *err = NULL, *diags = NULL;
    CHECK(msccl_abi_version() == 5, "abi %d", msccl_abi_version());
    CHECK(msccl_version(&out, &err) == 0 && strncmp(out, "libmsccl ", 9) == 0, "version %s", out ? out : err);
    msccl_free(out);
    out = NULL;

    int64_t plan = 0;
    int st = msccl_compile("ring.msccl", (char *)ring, strlen(ring), "{\"ranks\": 4}", &plan, &diags, &err);
    CHECK(st == 0 && plan > 0, "compile: %d %s", st, err ? err : "");
    CHECK(diags && strcmp(diags, "[]") == 0, "diagnostics %s", diags ? diags : "(null)");
    msccl_free(diags);
    diags = NULL;

    size_t n = 0;
    CHECK(msccl_plan_json(plan, &out, &n, &err) == 0 && n > 100 && out[0] == '{', "plan json");
    msccl_free(out);
    out = NULL;

    CHECK(msccl_verify(plan, NULL, &out, &err) == 0 && strstr(out, "\"ok\":true") && strstr(out, "\"verdict\":\"correct\""), "verify %s", out ? out : err);
    msccl_free(out);
    out = NULL;
    CHECK(msccl_verify(plan, "{\"require_consistent\": true}", &out, &err) == 0 && strstr(out, "\"ok\":true") && strstr(out, "\"consistent\":true"),
          "verify, consistency required: %s", out ? out : err);
    msccl_free(out);
    out = NULL;

    // Errors are values: a compile error with its position, a bad
    // option, a stale handle, a deliberate panic.
    int64_t bad = 0;
    st = msccl_compile("bad.msccl", "collective allreduce\nparam ranks = 2\nbogus\n", 43, NULL, &bad, &diags, &err);
    CHECK(st == 2 && bad == 0 && err && strncmp(err, "bad.msccl:3:1: error: ", 22) == 0, "compile error: %d %s", st, err ? err : "");
    CHECK(diags && strstr(diags, "\"line\":3"), "diagnostics %s", diags ? diags : "(null)");
    msccl_free(err);
    msccl_free(diags);
    err = diags = NULL;

    st = msccl_verify(plan, "{\"size\": -4}", &out, &err);
    CHECK(st == 1 && err && strstr(err, "positive"), "bad option: %d %s", st, err ? err : "");
    msccl_free(err);
    err = NULL;

    CHECK(msccl_release(plan, &err) == 0, "release");
    st = msccl_release(plan, &err);
    CHECK(st == 1 && err && strstr(err, "released already"), "second release: %d %s", st, err ? err : "");
    msccl_free(err);
    err = NULL;

    /* The device headers' directory, for a C caller's own kernels. */
    st = msccl_include_path(&out, &err);
    CHECK(st == 0 && out && strlen(out) > 0, "include path: %d %s", st, err ? err : "");
    msccl_free(out);
    out = NULL;

    st = msccl_selftest_panic(&err);
    CHECK(st == 3 && err && strstr(err, "deliberate panic"), "panic: %d", st);
    msccl_free(err);

    CHECK(msccl_live_handles() == 0, "%lld handles live", (long long)msccl_live_handles());
    if (failed)
        return 1;
    printf("libmsccl from C: ok\n");
    return 0;
}
