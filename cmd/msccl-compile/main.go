package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/version"
)

// exit codes
const (
	exitOK    = 0
	exitBad   = 1 // the input has problems (invalid plan, failing verdict)
	exitUsage = 2
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary, run}
}

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(stdout, version.String("msccl-compile"))
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		msg := fmt.Sprintf("msccl-compile: unknown command %q", args[0])
		if hint := diag.Suggest(args[0], commandNames()); hint != "" {
			msg += " (" + hint + ")"
		}
		// One line: the full usage would bury the hint.
		fmt.Fprintln(stderr, msg+"; 'msccl-compile -h' lists the commands")
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: msccl-compile COMMAND [arguments]\n\ncommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'msccl-compile COMMAND -h' for a command's flags, 'msccl-compile --version' for the build.")
}

// errorf prints "msccl-compile CMD: msg" and returns exitBad.
func errorf(stderr io.Writer, cmd, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(stderr, "msccl-compile %s: %s\n", cmd, strings.TrimRight(msg, "\n"))
	return exitBad
}
