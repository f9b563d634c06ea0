package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// flagSet is a command's flags. The standard package's own reporting (the
// error, then every flag's default) is switched off: a bad flag gets one
// line naming it and pointing at -h, and -h alone prints the flags and
// exits 0.
type flagSet struct {
	*flag.FlagSet
	usageLine string
	stderr    io.Writer
}

func newFlags(name string, stderr io.Writer, usageLine string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{fs, usageLine, stderr}
}

// parse parses flags that may come before or after positional arguments
// (`sim plan.json --size 1M` and `sim --size 1M plan.json`), which the
// standard flag package does not allow on its own. When it returns false
// the command is over and code is its exit status.
func (fs *flagSet) parse(args []string) (pos []string, code int, ok bool) {
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprintf(fs.stderr, "usage: msccl-compile %s\n", fs.usageLine)
			fs.SetOutput(fs.stderr)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
			return nil, exitOK, false
		case err != nil:
			return nil, fs.usageError("%v", err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError prints a wrong invocation on one line, with the command's
// usage, and returns exitUsage.
func (fs *flagSet) usageError(format string, args ...any) int {
	fmt.Fprintf(fs.stderr, "msccl-compile %s: %s (usage: msccl-compile %s; -h lists the flags)\n", fs.Name(), fmt.Sprintf(format, args...), fs.usageLine)
	return exitUsage
}

// arguments words a positional-argument count for usageError.
func arguments(pos []string) string {
	switch len(pos) {
	case 0:
		return "no arguments"
	case 1:
		return "1 argument"
	}
	return fmt.Sprintf("%d arguments", len(pos))
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
