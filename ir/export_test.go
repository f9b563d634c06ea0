package ir

// EncodeReflect exposes the reference encoder to the external tests.
var EncodeReflect = encodeReflect

func firstDiff(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
