package ir

import (
	"bytes"
	"strings"
	"testing"
)

func rolesPlan(c Collective, n int) *Plan {
	p := &Plan{Name: "roles", Collective: c, Protocol: Simple, BufferAlignment: 16, MaxMessageSize: ^uint64(0), NumThreadsPerBlock: 1024}
	for r := range n {
		p.GPUs = append(p.GPUs, GPU{ID: r, InputChunks: 1, OutputChunks: 1})
	}
	return p
}

// TestRolesRoundTrip: root and peers survive encode and decode, the
// hand-written encoder matches the reflect one, and plans without them
// encode without the keys (so older plans stay byte for byte the same).
func TestRolesRoundTrip(t *testing.T) {
	plain := rolesPlan(Broadcast, 3)
	js, err := Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(js, []byte(`"root"`)) || bytes.Contains(js, []byte(`"peers"`)) {
		t.Errorf("root 0 and no peer map must not be written:\n%s", js)
	}
	rooted := rolesPlan(Gather, 3)
	rooted.Root = 2
	peered := rolesPlan(SendRecv, 3)
	peered.Peers = []int{2, 0, 1}
	for _, p := range []*Plan{plain, rooted, peered} {
		js, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := encodeReflect(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(js, ref) {
			t.Errorf("%s: hand-written encoding differs from the reflect one:\n%s\nwant:\n%s", p.Collective, js, ref)
		}
		q, ds := Decode(js)
		if ds.HasErrors() || len(ds) > 0 {
			t.Fatalf("%s: decode: %s", p.Collective, ds)
		}
		if q.Root != p.Root || len(q.Peers) != len(p.Peers) {
			t.Errorf("%s: decoded root %d peers %v, want %d %v", p.Collective, q.Root, q.Peers, p.Root, p.Peers)
		}
		if ds := Validate(q); len(ds) > 0 {
			t.Errorf("%s: %s", p.Collective, ds)
		}
		if c := q.Clone(); len(c.Peers) > 0 && &c.Peers[0] == &q.Peers[0] {
			t.Errorf("Clone shares the peer map")
		}
	}
	if d := Dump(rooted); !strings.Contains(d, " root=2") {
		t.Errorf("dump lacks the root: %s", d)
	}
	if d := Dump(peered); !strings.Contains(d, " peers=[2 0 1]") {
		t.Errorf("dump lacks the peer map: %s", d)
	}
}

func TestRolesValidate(t *testing.T) {
	for _, c := range []struct {
		coll  Collective
		root  int
		peers []int
		want  string
	}{
		{Broadcast, 3, nil, "root: root 3 out of range: the plan has 3 gpus"},
		{AllReduce, 1, nil, "root: allreduce has no root (only broadcast, reduce, gather and scatter do)"},
		{Broadcast, 0, []int{1, 2, 0}, "peers: broadcast has no peer map (only sendrecv does)"},
		{SendRecv, 0, []int{1, 2}, "peers: the peer map has 2 entries for 3 gpus"},
		{SendRecv, 0, []int{1, 1, 0}, "peers[1]: ranks 0 and 1 both send to 1: the peer map must be a permutation (every rank receives once)"},
		{SendRecv, 0, []int{1, 3, 0}, "peers[1]: rank 1 sends to 3, out of range 0..2"},
		{SendRecv, 0, []int{-1, 2, 0}, "peers[0]: rank 0 sends to -1, out of range 0..2"},
		{SendRecv, 0, []int{0, 1, 2}, ""},
	} {
		p := rolesPlan(c.coll, 3)
		p.Root, p.Peers = c.root, c.peers
		got := strings.TrimSpace(Validate(p).String())
		if !strings.Contains(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("%s root %d peers %v:\ngot  %s\nwant %s", c.coll, c.root, c.peers, got, c.want)
		}
	}
}

// TestRolesDecode: the new keys are read, not warned about as unknown,
// and a bad value is an error at its path.
func TestRolesDecode(t *testing.T) {
	js, err := Encode(rolesPlan(SendRecv, 2))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(js), `"uniform_scratch"`, `"peers": [1, "x"], "root": -1, "uniform_scratch"`, 1)
	if s == string(js) {
		s = strings.Replace(string(js), `"max_message_size"`, `"peers": [1, "x"], "root": -1, "max_message_size"`, 1)
	}
	_, ds := Decode([]byte(s))
	got := ds.String()
	for _, want := range []string{"peers[1]: expected a non-negative integer", "root: expected a non-negative integer"} {
		if !strings.Contains(got, want) {
			t.Errorf("decode diagnostics lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "unknown field") {
		t.Errorf("root/peers reported as unknown:\n%s", got)
	}
	for _, c := range []struct {
		coll    Collective
		msg     int64
		in, out int64
	}{{Gather, 48, 16, 48}, {Scatter, 48, 48, 16}, {Reduce, 48, 48, 48}, {Broadcast, 48, 48, 48}} {
		in, out, err := rolesPlan(c.coll, 3).BufferBytes(c.msg)
		if err != nil || in != c.in || out != c.out {
			t.Errorf("%s BufferBytes(%d) = %d, %d, %v; want %d, %d", c.coll, c.msg, in, out, err, c.in, c.out)
		}
	}
}
