/*
 * check.h: the checking macros of the C tests here. FAIL prints a line
 * naming the rank, the failure and the line, and exits 1; CHECK wants
 * ncclSuccess; EXPECT wants a result code and a last error naming text
 * (when not ""). share_id hands rank 0's ncclUniqueId to the other
 * processes through a file. The including file defines `static int
 * rank;` first and includes stdio.h, stdlib.h, string.h, unistd.h and
 * nccl.h.
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

/* share_id: rank 0 makes the id and writes it to path (through a rename,
 * so no rank reads half of it); the others wait up to 30 s for it. */
static inline void share_id(const char *path, ncclUniqueId *id) {
  if (rank == 0) {
    CHECK(ncclGetUniqueId(id));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, 1, sizeof *id, f) != sizeof *id || fclose(f) != 0 || rename(tmp, path) != 0) FAIL("writing %s", path);
    return;
  }
  for (int t = 0; t < 600; t++) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, 1, sizeof *id, f);
      fclose(f);
      if (n == sizeof *id) return;
    }
    usleep(50000);
  }
  FAIL("no unique id in %s after 30 s", path);
}

#endif
