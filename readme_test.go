//go:build unix

package msccl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msccl-go/msccl-go/internal/fulltest"
)

// The README's guide is a list of commands a new user types. This test
// runs them, so that a renamed flag, a moved file or a changed diagnostic
// fails here instead of on the first reader. The conventions it reads are
// stated in the README itself (A short guide):
//
//   - only ```sh blocks run; ```go and ```python ones are excerpts;
//   - a command is a line, joined with the next while it ends in `\`, or a
//     line that opens a heredoc (<<'EOF') with its body and terminator;
//   - a trailing `# needs: WHAT` skips it (WHAT one of readmeNeeds): it
//     needs a GPU, Python, torch, or is the test suite itself;
//   - a trailing `# fails: TEXT` means it must exit non-zero with TEXT in
//     its output (the guide shows refusals as well as successes);
//   - "/tmp/" stands for a directory of the test's own, so runs in
//     parallel or by different users do not share files;
//   - the default run (internal/fulltest's sample) leaves out a block from
//     its first command that builds a C library (readmeCostly) on: a
//     c-shared link costs about 20 s, and `go test ./nccl` links the same
//     library. MSCCL_FULL=1, as CI sets, runs them.

// readmeNeeds are the reasons a README command may be skipped for; any
// other word after "needs:" is an error, so that a typo cannot quietly
// take a command out of the test.
var readmeNeeds = map[string]bool{"gpu": true, "python": true, "torch": true, "suite": true}

// readmeCommandTimeout bounds one command: building libmsccl_nccl.so on a
// busy two-core machine is the slowest at about a minute.
const readmeCommandTimeout = 5 * time.Minute

// readmeCostly marks a command the sample run leaves out, with the rest
// of its block, which depends on what it builds.
var readmeCostly = regexp.MustCompile(`scripts/build-nccl|-buildmode=c-shared`)

type readmeCommand struct {
	path  string // the document
	block int    // which sh block, counted from 0
	line  int    // 1-based line of the README where it starts
	text  string // the shell text, markers removed
	needs string // skip reason, "" to run
	fails string // non-empty: must fail and say this
	mark  string // "needs"/"fails" word when the marker was malformed
}

var (
	// Any "# need...:" or "# fail...:" at the end is taken for a marker,
	// so that a misspelled one is reported rather than run as a comment.
	readmeMarker  = regexp.MustCompile(`\s#\s*(need\w*|fail\w*):\s*(.*?)\s*$`)
	readmeHeredoc = regexp.MustCompile(`<<-?\s*'?"?([A-Za-z_]+)'?"?`)
)

// readmeCommands returns the commands of every ```sh block of md, the
// text of the document at path.
func readmeCommands(path, md string) ([]readmeCommand, error) {
	var cmds []readmeCommand
	lines := strings.Split(md, "\n")
	inSh, block := false, -1
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		if strings.HasPrefix(trim, "```") {
			switch {
			case inSh && trim != "```":
				return nil, fmt.Errorf("%s:%d: fence %q inside a sh block", path, i+1, trim)
			case inSh:
				inSh = false
			case trim == "```sh":
				inSh = true
				block++
			default: // another language's block, an excerpt: skip to its end
				for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				}
			}
			continue
		}
		if !inSh || trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		c := readmeCommand{path: path, block: block, line: i + 1}
		text := l
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			text = strings.TrimSuffix(text, `\`) + "\n" + lines[i]
		}
		if m := readmeMarker.FindStringSubmatchIndex(text); m != nil {
			word, arg := text[m[2]:m[3]], text[m[4]:m[5]]
			text = text[:m[0]]
			switch {
			case word == "needs" && readmeNeeds[arg]:
				c.needs = arg
			case word == "fails" && arg != "":
				c.fails = arg
			default:
				c.mark = word + ": " + arg
			}
		}
		if m := readmeHeredoc.FindStringSubmatch(text); m != nil {
			end := m[1]
			for {
				i++
				if i >= len(lines) {
					return nil, fmt.Errorf("%s:%d: heredoc %s never ends", path, c.line, end)
				}
				text += "\n" + lines[i]
				if strings.TrimSpace(lines[i]) == end {
					break
				}
			}
		}
		c.text = text
		cmds = append(cmds, c)
	}
	if inSh {
		return nil, fmt.Errorf("%s: a ```sh block never ends", path)
	}
	return cmds, nil
}

// runReadme runs cmds in order in dir with /tmp/ mapped to tmp and returns
// one error per command that did not do what the README says. With sample
// it leaves out the costly commands and what follows them in their block.
func runReadme(t *testing.T, cmds []readmeCommand, dir, tmp string, sample bool) []error {
	var errs []error
	skipBlock := -1
	for _, c := range cmds {
		if sample && (c.block == skipBlock || readmeCostly.MatchString(c.text)) {
			skipBlock = c.block
			t.Logf("%s:%d: left out of the sample run (%s=1 runs it)", c.path, c.line, fulltest.Env)
			continue
		}
		if c.mark != "" {
			errs = append(errs, fmt.Errorf("%s:%d: marker %q: use needs: one of gpu, python, torch, suite, or fails: TEXT", c.path, c.line, c.mark))
			continue
		}
		if c.needs != "" {
			t.Logf("%s:%d: skipped (needs %s)", c.path, c.line, c.needs)
			continue
		}
		text := strings.ReplaceAll(c.text, "/tmp/", tmp+"/")
		start := time.Now()
		out, err := readmeRun(text, dir)
		t.Logf("%s:%d: %.1fs", c.path, c.line, time.Since(start).Seconds())
		fails := strings.ReplaceAll(c.fails, "/tmp/", tmp+"/")
		switch {
		case c.fails == "" && err != nil:
			errs = append(errs, fmt.Errorf("%s:%d: %s\n%v\n%s", c.path, c.line, c.text, err, out))
		case c.fails != "" && err == nil:
			errs = append(errs, fmt.Errorf("%s:%d: %s\nsucceeded; the README says it fails with %q\n%s", c.path, c.line, c.text, c.fails, out))
		case c.fails != "" && !strings.Contains(out, fails):
			errs = append(errs, fmt.Errorf("%s:%d: %s\nfailed (%v) without saying %q:\n%s", c.path, c.line, c.text, err, c.fails, out))
		}
	}
	return errs
}

// readmeRun runs one command under bash as a user's shell would (errexit
// and pipefail, so that a failing stage is not hidden), in a process group
// of its own so that a timeout also ends what it started in the
// background.
func readmeRun(text, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readmeCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -eo pipefail\n"+text)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", readmeCommandTimeout, err)
	}
	return out.String(), err
}

// readmeDocs are the documents whose commands run, with the fewest
// commands each must have (fewer means the parser lost them).
var readmeDocs = []struct {
	path string
	min  int
}{{"README.md", 10}, {"docs/tutorial.md", 8}}

// TestREADMECommands runs every command of the sh blocks of README.md and
// docs/tutorial.md that needs no GPU, Python or torch, each document in a
// directory of its own. MSCCL_README_SKIP=1 skips it where the commands
// cannot run (no C compiler).
func TestREADMECommands(t *testing.T) {
	if os.Getenv("MSCCL_README_SKIP") != "" {
		t.Skip("MSCCL_README_SKIP is set")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range readmeDocs {
		t.Run(doc.path, func(t *testing.T) {
			md, err := os.ReadFile(doc.path)
			if err != nil {
				t.Fatal(err)
			}
			cmds, err := readmeCommands(doc.path, string(md))
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds) < doc.min {
				t.Fatalf("%s has %d commands in sh blocks, want at least %d; the parser lost them", doc.path, len(cmds), doc.min)
			}
			for _, e := range runReadme(t, cmds, dir, t.TempDir(), fulltest.Sample()) {
				t.Error(e)
			}
		})
	}
}

// TestREADMERunnerFails shows the runner catches each way a document can
// go stale: a command that fails, a refusal that no longer happens, a
// refusal that says something else, and a misspelled marker.
func TestREADMERunnerFails(t *testing.T) {
	md := "text\n```sh\n" +
		"false\n" +
		"true  # fails: anything\n" +
		"echo other; exit 3  # fails: expected words\n" +
		"echo 'expected words'; exit 3  # fails: expected words\n" +
		"false  # needs: gpu\n" +
		"false  # need: gpu\n" +
		"test -d /tmp/ && \\\n  echo continued\n" +
		"cat > /tmp/f <<'EOF'\n# not a comment of the block\nfalse  # needs: gpu\nEOF\n" +
		"grep -q 'needs: gpu$' /tmp/f\n" +
		"```\n```go\nfalse\n```\n"
	cmds, err := readmeCommands("README.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 9 {
		t.Fatalf("parsed %d commands, want 9: %+v", len(cmds), cmds)
	}
	errs := runReadme(t, cmds, t.TempDir(), t.TempDir(), false)
	var lines []string
	for _, e := range errs {
		lines = append(lines, strings.SplitN(e.Error(), ":", 3)[1])
	}
	// Lines 3 (false), 4 (succeeded), 5 (wrong words), 8 (marker).
	if got, want := strings.Join(lines, ","), "3,4,5,8"; got != want {
		t.Errorf("errors at README lines %s, want %s:\n%v", got, want, errs)
	}
}

// TestREADMEMarkersKnown keeps the reasons the README documents and the
// ones the runner accepts the same.
func TestREADMEMarkersKnown(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for need := range readmeNeeds {
		if !strings.Contains(string(md), "`# needs: "+need+"`") {
			t.Errorf("README.md does not document the marker `# needs: %s`", need)
		}
	}
}

// TestArchitectureLength keeps docs/architecture.md a document a newcomer
// reads in one sitting (esbuild's is about 27 k characters): it describes
// the code as it is; history belongs in git and docs/rationale.md.
func TestArchitectureLength(t *testing.T) {
	const limit = 25000
	b, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(string(b))); n > limit {
		t.Errorf("docs/architecture.md has %d characters, over %d: condense it (history and measurements go to docs/rationale.md and docs/BENCHMARKS.md)", n, limit)
	}
}
