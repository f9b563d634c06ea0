package kernels

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// Headers returns the device headers a user's kernel includes, by name
// (msccl.cuh, memory_channel.cuh, ...), from the copy built into the
// binary.
func Headers() (map[string][]byte, error) {
	names, err := fs.Glob(files, IncludeDir+"/*.cuh")
	if err != nil {
		return nil, err
	}
	h := make(map[string][]byte, len(names))
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		h[path.Base(n)] = data
	}
	return h, nil
}

// WriteInclude writes the device headers under dir/msccl/ and returns
// dir: the include path with which `#include <msccl/msccl.cuh>` resolves.
func WriteInclude(dir string) (string, error) {
	h, err := Headers()
	if err != nil {
		return "", err
	}
	sub := filepath.Join(dir, "msccl")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return "", err
	}
	for n, data := range h {
		if err := os.WriteFile(filepath.Join(sub, n), data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// IncludePath is the include directory of this binary's headers, written
// once into the user's cache directory under a name that hashes their
// contents: an installed msccl-compile or a Go program can hand it to
// nvcc, CuPy or NVRTC from anywhere, and two versions never share one.
func IncludePath() (string, error) {
	h, err := Headers()
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, n := range names {
		fmt.Fprintf(sum, "%s %d\n", n, len(h[n]))
		sum.Write(h[n])
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the device headers (set XDG_CACHE_HOME or HOME): %w", err)
	}
	dir := filepath.Join(cache, "msccl-go", fmt.Sprintf("include-%x", sum.Sum(nil)[:8]))
	if _, err := os.Stat(filepath.Join(dir, "msccl", "msccl.cuh")); err == nil {
		return dir, nil
	}
	// Written beside and renamed into place, so a concurrent reader sees
	// either no directory or a whole one.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "include-tmp-")
	if err != nil {
		return "", err
	}
	if _, err := WriteInclude(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, "msccl", "msccl.cuh")); serr == nil {
			return dir, nil // another process won the race
		}
		return "", err
	}
	return dir, nil
}
