package main

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/msccl-go/msccl-go/algorithms"
	"github.com/msccl-go/msccl-go/compiler"
)

// libraryWith is the algorithm library with the selection table replaced
// (nil: the shipped one).
func libraryWith(t *testing.T, table []byte) fstest.MapFS {
	t.Helper()
	mfs := fstest.MapFS{}
	err := fs.WalkDir(algorithms.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(algorithms.FS(), p)
		mfs[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if table != nil {
		mfs[algorithms.Selection] = &fstest.MapFile{Data: table}
	}
	return mfs
}

// picks names, per compiled row, the algorithm and its defines.
func picks(t *testing.T, mfs fs.FS, collective string, ranks int64) []string {
	t.Helper()
	plans, err := compiler.PlansFS(mfs, algorithms.Selection, map[string]int64{"ranks": ranks})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, np := range plans {
		if np.Row.Collective != collective {
			continue
		}
		s := strings.TrimSuffix(np.Row.Algorithm, ".msccl") + " " + np.Row.MinSize + ".." + np.Row.MaxSize
		if n := np.Row.Defines["instances"]; n > 0 {
			s += " i" + strconv.FormatInt(n, 10)
		}
		out = append(out, s)
	}
	return out
}

// TestMergeTable: --tune-table writes the built-in table with one world
// of one collective handed to the tuned rows; every other world keeps its
// algorithms, and every other line of the file is kept as it is.
func TestMergeTable(t *testing.T) {
	shipped, err := fs.ReadFile(algorithms.FS(), algorithms.Selection)
	if err != nil {
		t.Fatal(err)
	}
	tuned := tunedRows("allreduce", 8, []tuneResult{
		{candidate{"allreduce_allpairs_packet", 1, 1024}, 1 << 10, 20, 0},
		{candidate{"allreduce_allpairs", 16, 512}, 1 << 20, 40, 0},
	})
	note := "# allreduce at 8 ranks: tuned\n"
	merged, err := mergeTable(shipped, "allreduce", 8, tuned, note)
	if err != nil {
		t.Fatal(err)
	}
	text := string(merged)
	if !strings.Contains(text, formatRows(tuned)) || strings.Count(text, note) != 1 {
		t.Errorf("tuned rows not placed once:\n%s", text)
	}
	// The shipped table's note on its own 8-rank rows (an earlier tune's)
	// goes with them: the new note stands alone.
	if strings.Contains(text, "# allreduce at 8 ranks: tuned by msccl-bench --tune on one NVIDIA H200\n") {
		t.Errorf("the replaced rows' note is kept:\n%s", text)
	}
	// Everything but the 8-rank allreduce rows is kept line for line.
	for _, keep := range []string{"# Algorithm selection:", "# Several nodes: rows for runs given -D nodes and -D gpus_per_node.", "  algorithm: allreduce_hierarchical.msccl", "  ranks: [17, 32]"} {
		if !strings.Contains(text, keep) {
			t.Errorf("lost %q", keep)
		}
	}
	mfs := libraryWith(t, merged)
	base := libraryWith(t, shipped)
	if got := strings.Join(picks(t, mfs, "allreduce", 8), "; "); got != "allreduce_allpairs_packet 0..1KiB; allreduce_allpairs_packet 1KiB..1MiB i1; allreduce_allpairs 1MiB..inf i16" {
		t.Errorf("8 ranks pick %s", got)
	}
	for _, n := range []int64{2, 7, 9, 16, 24} {
		if got, want := strings.Join(picks(t, mfs, "allreduce", n), "; "), strings.Join(picks(t, base, "allreduce", n), "; "); got != want {
			t.Errorf("%d ranks: merged table picks %s, shipped %s", n, got, want)
		}
	}
	if got, want := strings.Join(picks(t, mfs, "allgather", 8), "; "), strings.Join(picks(t, base, "allgather", 8), "; "); got != want {
		t.Errorf("allgather at 8 ranks: %s, shipped %s", got, want)
	}

	// A world at the edge of a row, one that is the whole of a row, and
	// one that no row holds; below the tuned rows' first size (1 KiB)
	// each keeps what the built-in table gave it there.
	for _, c := range []struct {
		ranks int64
		keep  string
		want  string
	}{
		{2, "ranks: [3, 7]", "allreduce_allpairs_packet 0..1KiB; allreduce_ring 1KiB..inf i1"},
		{16, "ranks: [9, 15]", "allreduce_allpairs_packet 0..1KiB; allreduce_ring 1KiB..inf i1"},
		{64, "", "allreduce_ring 0..1KiB; allreduce_ring 1KiB..inf i1"},
		{40, "", "allreduce_ring 1KiB..inf i1"},
	} {
		tr := tunedRows("allreduce", int(c.ranks), []tuneResult{{candidate{"allreduce_ring", 1, 512}, 1 << 10, 20, 0}})
		m, err := mergeTable(shipped, "allreduce", c.ranks, tr, note)
		if err != nil {
			t.Fatal(err)
		}
		if c.keep != "" && !strings.Contains(string(m), c.keep) {
			t.Errorf("%d ranks: no %q in\n%s", c.ranks, c.keep, m)
		}
		if got := strings.Join(picks(t, libraryWith(t, m), "allreduce", c.ranks), "; "); got != c.want {
			t.Errorf("%d ranks pick %s, want %s", c.ranks, got, c.want)
		}
	}
}
