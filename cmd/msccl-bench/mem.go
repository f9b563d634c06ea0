package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// refMemory is the host memory one CPU reference (-c) may use: 60% of what
// the kernel reports available, so that the largest sizes of packet plans
// (whose scratch is several times the message) are checked rather than
// refused at the CPU executor's 16 GiB default. Without /proc/meminfo the
// default stands.
func refMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10 * 6 / 10
		}
	}
	return 0
}
