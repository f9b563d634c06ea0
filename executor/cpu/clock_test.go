package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestClocksMatchDense drives the persistent clocks (clock.go) and plain
// slices through the same random operations, including the ones that
// share nodes (snapshots, assignment, joins that adopt subtrees), and
// checks every entry after each step: a node changed in place while
// another clock still held it would show up as a mismatch.
func TestClocksMatchDense(t *testing.T) {
	for _, n := range []int{3, 40, 1100, 40000} {
		every := max(1, n/200) // full checks cost O(n) per clock
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		var ts tagSource
		const k = 6
		cs := make([]clocks, k)
		dense := make([][2][]uint32, k)
		for i := range cs {
			cs[i] = newClocks(n, &ts)
			dense[i] = [2][]uint32{make([]uint32, n), make([]uint32, n)}
		}
		var snaps []clocks
		var snapDense [][2][]uint32
		hot := func() int { // entries cluster, as agents of one block index do
			if rng.IntN(4) == 0 {
				return rng.IntN(n)
			}
			return rng.IntN(min(n, 70))
		}
		for step := range 1500 {
			i, j := rng.IntN(k), rng.IntN(k)
			switch op := rng.IntN(8); op {
			case 0, 1: // set both
				a, x := hot(), uint32(rng.IntN(1000))
				// entries only grow in the simulator; keep V ≤ E
				x = max(x, dense[i][0][a])
				cs[i].set(a, x)
				dense[i][0][a], dense[i][1][a] = x, x
			case 2: // set E only
				a := hot()
				x := dense[i][0][a] + uint32(rng.IntN(5))
				cs[i].E.set(a, x)
				dense[i][0][a] = x
			case 3: // release join
				src, sd := cs[j], dense[j]
				if len(snaps) > 0 && rng.IntN(2) == 0 {
					q := rng.IntN(len(snaps))
					src, sd = snaps[q], snapDense[q]
				}
				if src.E == cs[i].E {
					continue
				}
				cs[i].join(src)
				for a := range n {
					dense[i][0][a] = max(dense[i][0][a], sd[0][a])
					dense[i][1][a] = max(dense[i][1][a], sd[1][a])
				}
			case 4: // relaxed join (E only)
				if i == j {
					continue
				}
				join(cs[i].E, cs[j].E)
				for a := range n {
					dense[i][0][a] = max(dense[i][0][a], dense[j][0][a])
				}
			case 5: // snapshot
				sd := [2][]uint32{append([]uint32(nil), dense[i][0]...), append([]uint32(nil), dense[i][1]...)}
				if len(snaps) < 16 {
					snaps, snapDense = append(snaps, cs[i].frozen()), append(snapDense, sd)
				} else {
					q := rng.IntN(len(snaps))
					snaps[q], snapDense[q] = cs[i].frozen(), sd
				}
			case 6: // assign, or V takes E (a kernel boundary)
				if rng.IntN(2) == 0 && i != j {
					cs[i].assign(cs[j])
					copy(dense[i][0], dense[j][0])
					copy(dense[i][1], dense[j][1])
				} else {
					cs[i].V.assign(cs[i].E)
					copy(dense[i][1], dense[i][0])
				}
			case 7: // clone into a fresh clock, or clear
				if rng.IntN(3) == 0 {
					cs[i].clear()
					clear(dense[i][0])
					clear(dense[i][1])
				} else {
					cs[i] = clocks{E: cs[j].E.clone(), V: cs[j].V.clone()}
					dense[i] = [2][]uint32{append([]uint32(nil), dense[j][0]...), append([]uint32(nil), dense[j][1]...)}
				}
			}
			check := func(what string, c clocks, d [2][]uint32) {
				for a := range n {
					if c.E.get(a) != d[0][a] || c.V.get(a) != d[1][a] {
						t.Fatalf("n=%d step %d: %s entry %d is E %d V %d, want %d %d", n, step, what, a, c.E.get(a), c.V.get(a), d[0][a], d[1][a])
					}
				}
			}
			if step%every != 0 {
				continue
			}
			for x := range cs {
				check("clock", cs[x], dense[x])
			}
			for x := range snaps {
				check("snapshot", snaps[x], snapDense[x])
			}
		}
	}
}
