package size

import (
	"errors"
	"math"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  error // nil: accepted
	}{
		{"4096", 4096, nil},
		{"64K", 64 << 10, nil},
		{"64KiB", 64 << 10, nil},
		{"64kb", 64 << 10, nil},
		{"64k", 64 << 10, nil},
		{"1M", 1 << 20, nil},
		{"1MiB", 1 << 20, nil},
		{"1G", 1 << 30, nil},
		{"1GiB", 1 << 30, nil},
		{"512B", 512, nil},
		{" 8M ", 8 << 20, nil},
		{"9223372036854775807", math.MaxInt64, nil},
		{"8589934591G", 8589934591 << 30, nil}, // the largest whole GiB count
		{"8589934592G", 0, ErrRange},           // 2^63 bytes
		{"9999999999G", 0, ErrRange},
		{"9223372036854775808", 0, ErrRange},
		{"99999999999999999999999", 0, ErrRange},
		{"0", 0, ErrSyntax},
		{"0K", 0, ErrSyntax},
		{"-1K", 0, ErrSyntax},
		{"+1K", 0, ErrSyntax},
		{"1.5M", 0, ErrSyntax},
		{"0x10", 0, ErrSyntax},
		{"1_000", 0, ErrSyntax},
		{"", 0, ErrSyntax},
		{"K", 0, ErrSyntax},
		{"12Q", 0, ErrSyntax},
		{"1 M", 0, ErrSyntax},
		{"1T", 0, ErrSyntax},
		{"inf", 0, ErrSyntax}, // only ParseBound knows "inf"
		{"garbage", 0, ErrSyntax},
	} {
		got, err := Parse(c.in)
		if c.err == nil && (err != nil || got != c.want) {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if c.err != nil && (!errors.Is(err, c.err) || got != 0) {
			t.Errorf("Parse(%q) = %d, %v; want error %v", c.in, got, err, c.err)
		}
	}
}

// The error text is what the commands print on one line: it names the
// input as given.
func TestParseMessages(t *testing.T) {
	for in, want := range map[string]string{
		"12Q":         `invalid size "12Q": want a positive byte count such as 4096, 64K, 1MiB or 1G`,
		"9999999999G": `size "9999999999G" is too large: more than 2^63-1 bytes`,
	} {
		if _, err := Parse(in); err == nil || err.Error() != want {
			t.Errorf("Parse(%q): %v, want %q", in, err, want)
		}
	}
}

func TestParseBound(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"", 7, true}, {"0", 0, true}, {"inf", Inf, true}, {"INF", Inf, true}, {"128KiB", 128 << 10, true},
		{"-1", 0, false}, {"9999999999G", 0, false}, {"infinity", 0, false},
	} {
		got, err := ParseBound(c.in, 7)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseBound(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		1: "1", 1000: "1000", 1024: "1KiB", 1536: "1536", 3 << 20: "3MiB", 1 << 30: "1GiB", 1<<30 + 1<<20: "1025MiB", 16 << 30: "16GiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
		if back, err := Parse(Format(n)); err != nil || back != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, back, err)
		}
	}
	if got := FormatBound(Inf); got != "inf" {
		t.Errorf("FormatBound(Inf) = %q", got)
	}
}
