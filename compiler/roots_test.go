package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
	"golang.org/x/tools/txtar"
)

// TestRootedSchedules compiles the rooted and peer-mapped schedules of
// testdata/dsl and the library's direct broadcast, reduce, gather and
// scatter at 2..8 ranks and every root (the library proofs take root 0), and proves each plan on the
// CPU executor at the byte level and symbolically.
func TestRootedSchedules(t *testing.T) {
	files := corpus(t, "../testdata/dsl/coll_*.txtar", 5)
	for _, a := range []string{"broadcast", "reduce", "gather", "scatter"} {
		files = append(files, "../algorithms/"+a+"_direct.msccl")
	}
	for _, f := range files {
		var src []byte
		if strings.HasSuffix(f, ".msccl") {
			var err error
			if src, err = os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		} else {
			ar, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, fl := range ar.Files {
				if fl.Name == "input.msccl" {
					src = fl.Data
				}
			}
		}
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".txtar"), ".msccl")
		rooted := strings.Contains(string(src), "param root")
		for n := int64(2); n <= 8; n++ {
			if strings.Contains(name, "peer_list") && n != 4 || strings.Contains(name, "sendrecv_peers") && n%2 != 0 {
				continue
			}
			roots := []int64{0}
			if rooted {
				roots = nil
				for r := range n {
					roots = append(roots, r)
				}
			}
			for _, root := range roots {
				defs := map[string]int64{"ranks": n}
				if rooted {
					defs["root"] = root
				}
				t.Run(fmt.Sprintf("%s/ranks=%d/root=%d", name, n, root), func(t *testing.T) {
					p, _, ds := CompileSource("input.msccl", src, defs, Options{Check: true})
					if ds.HasErrors() {
						t.Fatal(ds)
					}
					if rooted && p.Root != int(root) {
						t.Fatalf("plan root %d, want %d", p.Root, root)
					}
					rule, err := p.SizeRule()
					if err != nil {
						t.Fatal(err)
					}
					size, ok := rule.Next(n * n * 48)
					if !ok {
						t.Fatalf("no size near %d in %s", n*n*48, rule)
					}
					for _, sym := range []bool{false, true} {
						rep, err := cpu.Run(p, cpu.Options{Size: size, DType: cpu.I32, Launches: 3, Symbolic: sym})
						if err != nil {
							t.Fatal(err)
						}
						if !rep.OK() {
							t.Fatalf("symbolic=%v:\n%s", sym, rep)
						}
					}
				})
			}
		}
	}
}

// TestPeerMapDefault: a peer map equal to the default is left out of the
// plan, so the plan is the one a program without it compiles to.
func TestPeerMapDefault(t *testing.T) {
	body := "param ranks = 3\nfor r in 0..ranks {\n  copy rank(r).input[0] -> rank((r + 1) % ranks).output[0]\n}\n"
	var plans []string
	for _, hdr := range []string{"collective sendrecv", "collective sendrecv peers r -> (r + 1) % ranks", "collective sendrecv peers [1, 2, 0]"} {
		p, _, ds := CompileSource("input.msccl", []byte(hdr+"\n"+body), nil, Options{Check: true})
		if ds.HasErrors() {
			t.Fatalf("%s: %s", hdr, ds)
		}
		if p.Peers != nil {
			t.Errorf("%s: plan has peers %v", hdr, p.Peers)
		}
		js, err := ir.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, string(js))
	}
	if plans[0] != plans[1] || plans[0] != plans[2] {
		t.Errorf("the default peer map changes the plan")
	}
}
