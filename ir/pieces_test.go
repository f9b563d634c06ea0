package ir

import (
	"reflect"
	"testing"
)

func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		c       Collective
		in, out int64
	}{
		{AllReduce, 1, 1}, {Broadcast, 1, 1}, {Reduce, 1, 1},
		{AllGather, 1, 4}, {Gather, 1, 4},
		{ReduceScatter, 4, 1}, {Scatter, 4, 1},
		{AllToAll, 4, 4},
	} {
		if in, out := tc.c.Pieces(4); in != tc.in || out != tc.out {
			t.Errorf("%s: pieces %d, %d; want %d, %d", tc.c, in, out, tc.in, tc.out)
		}
	}
	if AllGather.MessageSize(10, 40) != 40 || ReduceScatter.MessageSize(40, 10) != 40 || AllReduce.MessageSize(8, 8) != 8 {
		t.Error("MessageSize does not count as nccl-tests")
	}
}

func TestStageSpans(t *testing.T) {
	for _, tc := range []struct {
		n, size, dst, src int64
		want              []Span
	}{
		{1, 0, 0, 0, nil},
		{1, 12, 16, 12, []Span{{0, 0, 12}}},
		{3, 4, 4, 4, []Span{{0, 0, 12}}},                       // unpadded: one copy
		{3, 4, 8, 4, []Span{{0, 0, 4}, {8, 4, 4}, {16, 8, 4}}}, // into a padded stage
		{2, 4, 4, 8, []Span{{0, 0, 4}, {4, 8, 4}}},             // out of one
	} {
		if got := StageSpans(tc.n, tc.size, tc.dst, tc.src); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("StageSpans(%d, %d, %d, %d) = %v, want %v", tc.n, tc.size, tc.dst, tc.src, got, tc.want)
		}
	}
}
