package ir

import (
	"strings"
	"testing"
)

func TestRemoteOwner(t *testing.T) {
	p := &Plan{GPUs: []GPU{
		{ID: 0, RemoteBuffers: []RemoteBuffer{{Rank: 1, Type: BufScratch}, {Rank: 7, Type: BufInput}}},
		{ID: 1},
	}}
	owner, typ, err := p.RemoteOwner(0, []int{1, 0}, ChanMemory, 1)
	if err != nil || owner != 1 || typ != BufScratch {
		t.Errorf("RemoteOwner = %d, %v, %v; want rank 1's scratch", owner, typ, err)
	}
	for _, c := range []struct {
		table []int
		id    int
		want  string
	}{
		{[]int{0}, 1, "no remote buffer 1 for memory channels"},
		{[]int{5}, 0, "gpu has no remote buffer 5"},
		{[]int{1}, 0, "names rank 7 of 2"},
	} {
		if _, _, err := p.RemoteOwner(0, c.table, ChanMemory, c.id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("table %v id %d: err %v, want %q", c.table, c.id, err, c.want)
		}
	}
}

func TestRefRangeSlicesTBG(t *testing.T) {
	lay := Layout{Align: 16, RefBytes: 1024, RefChunks: 4, Input: 1024}
	br := &BufRef{Type: BufInput, Index: 1, Size: 2}
	off, n := lay.RefRange(BufInput, br, &Op{})
	if wo, wn := lay.Ref(BufInput, 1, 2); off != wo || n != wn {
		t.Fatalf("no tbg: [%d,+%d), want [%d,+%d)", off, n, wo, wn)
	}
	op := &Op{}
	op.SetTBG(&TBGInfo{TBID: 1, TBGSize: 2})
	o1, n1 := lay.RefRange(BufInput, br, op)
	if o1 != off+n/2 || n1 != n/2 {
		t.Errorf("tbg 1 of 2: [%d,+%d), want the second half of [%d,+%d)", o1, n1, off, n)
	}
	if ChanSlot(ChanMemory) != 0 || ChanSlot(ChanPort) != 1 {
		t.Error("ChanSlot: memory 0, port 1")
	}
}
