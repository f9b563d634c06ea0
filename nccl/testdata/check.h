/*
 * check.h: the checking macros of the C tests here. FAIL prints a line
 * naming the rank, the failure and the line, and exits 1; CHECK wants
 * ncclSuccess; EXPECT wants a result code and a last error naming text
 * (when not ""). The including file defines `static int rank;` first.
 */
#ifndef MSCCL_TESTDATA_CHECK_H
#define MSCCL_TESTDATA_CHECK_H

#define FAIL(...)                              \
  do {                                         \
    fprintf(stderr, "rank %d: ", rank);        \
    fprintf(stderr, __VA_ARGS__);              \
    fprintf(stderr, " (line %d)\n", __LINE__); \
    exit(1);                                   \
  } while (0)

#define CHECK(call)                                                              \
  do {                                                                           \
    ncclResult_t r_ = (call);                                                    \
    if (r_ != ncclSuccess)                                                       \
      FAIL("%s: %s: %s", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
  } while (0)

#define EXPECT(call, code, text)                                                                   \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != (code)) FAIL("%s returned %d, want %d (%s)", #call, r_, code, ncclGetLastError(NULL)); \
    if (!strstr(ncclGetLastError(NULL), text))                                                     \
      FAIL("%s: last error %s, want it to name %s", #call, ncclGetLastError(NULL), text);          \
  } while (0)

#endif
