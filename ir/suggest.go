package ir

import (
	"fmt"

	"github.com/msccl-go/msccl-go/internal/textdist"
)

// suggestOp returns ` (did you mean "x"?)` for the closest op name, or "".
func suggestOp(name string) string {
	best, bestD := "", 3
	for i := range opTable {
		if d := textdist.Levenshtein(name, opTable[i].Name); d < bestD {
			best, bestD = opTable[i].Name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
