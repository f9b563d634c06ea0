package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseInterleaved parses flags that may come before or after positional
// arguments (`sim plan.json --size 1M` and `sim --size 1M plan.json`),
// which the standard flag package does not allow on its own.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func newFlags(name string, stderr io.Writer, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: msccl-compile %s\n", usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// defines collects repeated -D name=value flags.
type defines map[string]int64

func (d defines) String() string { return fmt.Sprint(map[string]int64(d)) }

func (d defines) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	var n int64
	if _, err := fmt.Sscan(val, &n); err != nil {
		return fmt.Errorf("value of %s must be an integer, got %q", name, val)
	}
	d[name] = n
	return nil
}
