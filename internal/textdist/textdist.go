// Package textdist measures how far apart two names are, for the "did you
// mean" hints of the plan decoder (ir) and the language (dsl). Each caller
// keeps its own threshold: what counts as a likely typo differs between an
// op name in JSON and an identifier in a program.
package textdist

// Levenshtein is the edit distance between a and b (insertions, deletions
// and substitutions of bytes).
func Levenshtein(a, b string) int {
	// Names are short: their rows live on the stack (the parser asks for
	// the distance of every statement's first word to each keyword).
	var rows [2][24]int
	prev, cur := rows[0][:0], rows[1][:0]
	if len(b) >= len(rows[0]) {
		prev, cur = make([]int, 0, len(b)+1), make([]int, 0, len(b)+1)
	}
	prev, cur = prev[:len(b)+1], cur[:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
