// Package hostmem answers how much host memory a CPU simulation may use
// (what one needs is the CPU executor's estimate, cpu.BufferMemory), so
// that msccl-compile sim and msccl-bench -c
// refuse a size that does not fit with both numbers in the message,
// instead of sizing against a fixed figure that is too small on a large
// host and too large on a small one (where the kernel would kill the
// process mid-run).
package hostmem

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/msccl-go/msccl-go/internal/size"
)

// Fallback is the budget where the available memory cannot be read (no
// /proc/meminfo: not Linux): the CPU executor's own default.
const Fallback = 16 << 30

// meminfo is the file Available reads; a variable so tests can point it
// at a fixture.
var meminfo = "/proc/meminfo"

// Available is the kernel's estimate of memory available to a new
// process without swapping (MemAvailable in /proc/meminfo), in bytes;
// false where it cannot be read.
func Available() (int64, bool) {
	f, err := os.Open(meminfo)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb < 0 || kb > math.MaxInt64>>10 {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// Budget is the memory a simulation may use and where the figure comes
// from, for messages.
type Budget struct {
	Bytes int64
	From  string // "75% of MemAvailable 62.0GiB", "$MSCCL_HOST_MEMORY", ...
}

// Env names an environment variable that sets the budget directly (a
// byte count such as 8GiB): for containers, where MemAvailable describes
// the host rather than the container's limit, and for tests.
const Env = "MSCCL_HOST_MEMORY"

// NewBudget allows percent of the available memory (the rest is for the
// Go heap's overhead, the plan and everything else on the host), the
// value of $MSCCL_HOST_MEMORY when set, or Fallback where neither is
// known; and never more than percent of the process's address-space
// limit (ulimit -v), past which the process would be killed instead of
// refusing.
func NewBudget(percent int64) (Budget, error) {
	if v := os.Getenv(Env); v != "" {
		n, err := size.Parse(v)
		if err != nil {
			return Budget{}, fmt.Errorf("$%s: %w", Env, err)
		}
		return Budget{n, "$" + Env}, nil
	}
	b := Budget{Fallback, "a fixed budget: MemAvailable unknown"}
	if avail, ok := Available(); ok {
		b = Budget{avail / 100 * percent, fmt.Sprintf("%d%% of MemAvailable %s", percent, Human(avail))}
	}
	if lim, ok := addressLimit(); ok && lim/100*percent < b.Bytes {
		b = Budget{lim / 100 * percent, fmt.Sprintf("%d%% of the address-space limit (ulimit -v) %s", percent, Human(lim))}
	}
	return b, nil
}

// Human prints a byte count for people: in the largest binary unit it
// reaches, exact when the unit divides it, else to a tenth. MaxInt64,
// where Need saturates, is "8EiB" (one byte short).
func Human(n int64) string {
	if n == math.MaxInt64 {
		return "8EiB"
	}
	for _, u := range []struct {
		name string
		b    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		switch {
		case n < u.b:
			continue
		case n%u.b == 0:
			return fmt.Sprintf("%d%s", n/u.b, u.name)
		}
		return fmt.Sprintf("%.1f%s", float64(n)/float64(u.b), u.name)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Check refuses a simulation that needs more than the budget, naming both
// numbers; what is for the message ("simulating plan.json at 1GiB").
func (b Budget) Check(what string, need int64) error {
	if need <= b.Bytes {
		return nil
	}
	return fmt.Errorf("%s needs about %s of host memory, more than %s", what, Human(need), b.describe())
}

func (b Budget) describe() string {
	return fmt.Sprintf("%s allowed (%s)", Human(b.Bytes), b.From)
}
