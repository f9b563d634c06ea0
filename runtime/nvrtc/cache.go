package nvrtc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultCacheDir is $XDG_CACHE_HOME/msccl-go, else ~/.cache/msccl-go.
func DefaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("nvrtc: no cache directory: %w", err)
	}
	return filepath.Join(base, "msccl-go"), nil
}

// CacheKey is the hex sha256 over the NVRTC version, the program name, the
// options and the source: any of them can change the image.
func CacheKey(src, name string, opts []string) (string, error) {
	major, minor, err := Version()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "nvrtc %d.%d\x00%s\x00%d\x00", major, minor, name, len(opts))
	for _, o := range opts {
		fmt.Fprintf(h, "%d:%s\x00", len(o), o)
	}
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CompileCached is Compile with an on-disk cache under dir ("" means
// DefaultCacheDir). Entries are written to a temporary file and renamed into
// place, so concurrent processes never read a partial image. A cache that
// cannot be read or written costs a compile, not a failure: the compiled
// image is still returned.
func CompileCached(dir, src, name string, opts []string) (image []byte, err error) {
	key, err := CacheKey(src, name, opts)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		if dir, err = DefaultCacheDir(); err != nil {
			dir = ""
		}
	}
	ext := ".ptx"
	if wantsCubin(opts) {
		ext = ".cubin"
	}
	var path string
	if dir != "" {
		path = filepath.Join(dir, key+ext)
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	image, _, err = Compile(src, name, opts)
	if err != nil {
		return nil, err
	}
	if path != "" {
		_ = writeAtomic(dir, path, image) // see the doc comment: best effort
	}
	return image, nil
}

func writeAtomic(dir, path string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
