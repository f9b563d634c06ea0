package ir

import "github.com/msccl-go/msccl-go/internal/diag"

// suggestOp returns ` (did you mean "x"?)` for the closest op name, or "".
func suggestOp(name string) string {
	names := make([]string, len(opTable))
	for i := range opTable {
		names[i] = opTable[i].Name
	}
	if s := diag.Suggest(name, names); s != "" {
		return " (" + s + ")"
	}
	return ""
}
