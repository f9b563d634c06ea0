package main

import (
	"strconv"
	"strings"
)

// parseDevice splits "cuda:N" (the GPU of ordinal N, as PyTorch names
// it) into "cuda" and "N"; other names pass through for msccl.OpenComm
// to judge.
func parseDevice(device string) (name, ordinal string, err error) {
	name, ordinal, ok := strings.Cut(device, ":")
	if !ok || name != "cuda" {
		return device, "", nil
	}
	if n, err := strconv.Atoi(ordinal); err != nil || n < 0 {
		return "", "", invalid("device %q: want cuda, or cuda:N with N a device ordinal", device)
	}
	return name, ordinal, nil
}
