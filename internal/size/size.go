// Package size reads and prints byte counts the way nccl-tests and the
// selection table write them: an integer with an optional binary suffix
// (K = KiB = KB = 1024, M, G). Both commands and the compiler's selection
// table use it, so "64K" means the same everywhere and every caller gets
// the same overflow check.
package size

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Inf is what ParseBound returns for "inf": no upper bound. It is the
// value plans store in max_message_size for "unbounded".
const Inf = math.MaxUint64

// suffixes longest first, so "KiB" is not read as "K" followed by "iB".
var suffixes = []struct {
	s string
	m int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// ErrSyntax and ErrRange classify Parse's errors for callers that word
// their own message.
var (
	ErrSyntax = errors.New("want a positive byte count such as 4096, 64K, 1MiB or 1G")
	ErrRange  = errors.New("more than 2^63-1 bytes")
)

// parse reads a non-negative byte count; it never overflows.
func parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	low := strings.ToLower(t)
	mult := int64(1)
	for _, suf := range suffixes {
		if strings.HasSuffix(low, suf.s) {
			t, mult = t[:len(t)-len(suf.s)], suf.m
			break
		}
	}
	// Digits only: ParseInt would also take a sign, and "0x10" or "1_000"
	// through base 0; neither is a size anyone means.
	if t == "" || strings.TrimLeft(t, "0123456789") != "" {
		return 0, fmt.Errorf("invalid size %q: %w", s, ErrSyntax)
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large: %w", s, ErrRange)
	}
	return n * mult, nil
}

// Parse reads a positive byte count: "4096", "64K", "64KiB", "1M",
// "1MiB", "1G", "1GiB" (suffixes in any case; a trailing "B" alone means
// bytes). Zero, negative numbers, fractions and values above MaxInt64
// are errors whose text names the input.
func Parse(s string) (int64, error) {
	n, err := parse(s)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("invalid size %q: %w", s, ErrSyntax)
	}
	return n, nil
}

// ParseBound reads one end of a size range, as the selection table's
// min_message_size and max_message_size: what Parse accepts, 0, or "inf"
// (Inf). The empty string is def.
func ParseBound(s string, def uint64) (uint64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return def, nil
	case "inf":
		return Inf, nil
	}
	n, err := parse(s)
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// Format prints a byte count with the largest binary suffix that divides
// it exactly ("64KiB", "1GiB", "1000"), so that Parse(Format(n)) is n.
func Format(n int64) string {
	if n < 0 {
		return strconv.FormatInt(n, 10)
	}
	return FormatBound(uint64(n))
}

// FormatBound is Format for one end of a range: Inf prints as "inf".
func FormatBound(n uint64) string {
	switch {
	case n == Inf:
		return "inf"
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + "GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + "KiB"
	}
	return strconv.FormatUint(n, 10)
}
