// Package nvrtctest holds what the tests of packages that compile CUDA
// source need from NVRTC: a check that skips a test where the library is
// not installed and fails it where NVRTC is there but broken. Like
// net/http/httptest it is for tests only; nothing in a program imports it,
// and it owns no NVRTC state (runtime/nvrtc does).
package nvrtctest
