package cpu

import (
	"bytes"
	"testing"
)

// TestBuffersReuse runs streaming cases with a pool whose recycled arrays
// were dirtied in between: verdicts and every launch's outputs must equal
// a run without the pool (arrays that must start zeroed are cleared).
func TestBuffersReuse(t *testing.T) {
	pool := NewBuffers(1 << 30)
	for _, name := range []string{"allreduce.json", "allreduce_packet.json", "reducescatter_pkt_2x4.json"} {
		p := fixtures(t)[name]
		collect := func(b *Buffers) (string, [][]byte) {
			var outs [][]byte
			rep, err := Run(p, Options{Size: 1 << 20, DType: F32, Launches: 3, Buffers: b,
				OnLaunch: func(_ int, _, o [][]byte) error {
					for _, x := range o {
						outs = append(outs, bytes.Clone(x))
					}
					return nil
				}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return rep.Verdict.String(), outs
		}
		wantV, want := collect(nil)
		for round := range 2 {
			pool.mu.Lock()
			for _, l := range pool.free {
				for _, s := range l {
					for i := range s.b {
						s.b[i] = 0xa5
					}
				}
			}
			pool.mu.Unlock()
			gotV, got := collect(pool)
			if gotV != wantV || len(got) != len(want) {
				t.Fatalf("%s round %d: verdict %s with %d outputs, want %s with %d", name, round, gotV, len(got), wantV, len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("%s round %d: output %d differs with recycled arrays", name, round, i)
				}
			}
		}
		if pool.held == 0 {
			t.Fatalf("%s: nothing was recycled", name)
		}
	}
}

// TestBuffersGet: a recycled array comes back cleared when asked (the
// simulator's buffers, scratch and packet store start zeroed, as make
// gives them), as is when not, and the pool keeps at most its bound.
func TestBuffersGet(t *testing.T) {
	b := NewBuffers(100)
	s := b.get(64, true)
	for i := range s {
		s[i] = 7
	}
	b.put(s)
	if z := b.get(64, true); &z[0] != &s[0] || bytes.Count(z, []byte{0}) != 64 {
		t.Fatalf("get(zero) after put: reused %v, zero bytes %d of 64", &z[0] == &s[0], bytes.Count(z, []byte{0}))
	}
	for i := range s {
		s[i] = 7
	}
	b.put(s)
	if d := b.get(64, false); &d[0] != &s[0] || d[0] != 7 {
		t.Fatal("get without zeroing did not hand back the recycled array as is")
	}
	b.put(make([]byte, 64))
	b.put(make([]byte, 64)) // over the 100-byte bound: dropped
	if b.held != 64 {
		t.Fatalf("pool holds %d bytes, want 64", b.held)
	}
	var nilPool *Buffers
	if len(nilPool.get(8, true)) != 8 {
		t.Fatal("a nil pool must allocate")
	}
	nilPool.put(s)
}

// TestBuffersMakeRoom: a full pool drops what was put back longest ago,
// so the lengths in demand now find their arrays.
func TestBuffersMakeRoom(t *testing.T) {
	b := NewBuffers(100)
	old, mid, cur := make([]byte, 40), make([]byte, 50), make([]byte, 60)
	b.put(old)
	b.put(mid)
	b.put(cur) // 150 bytes: old, then mid, make room
	if b.held != 60 {
		t.Fatalf("pool holds %d bytes, want 60", b.held)
	}
	if g := b.get(60, false); &g[0] != &cur[0] {
		t.Fatal("the array put back last was dropped")
	}
	if g := b.get(40, false); &g[0] == &old[0] {
		t.Fatal("the array put back first is still held")
	}
	b.put(make([]byte, 101)) // over the bound alone: not kept
	if b.held != 0 {
		t.Fatalf("pool holds %d bytes, want 0", b.held)
	}
}

// TestHoldsScratch: a run of a fixture that HoldsScratch says holds no
// scratch array never makes one, and the packet fixtures are such.
func TestHoldsScratch(t *testing.T) {
	without := 0
	for name, p := range fixtures(t) {
		s := &sim{p: p, opt: Options{Size: 1 << 20, DType: F32, Launches: 2}}
		if _, err := s.start(); err != nil {
			continue
		}
		holds := HoldsScratch(p)
		for _, rs := range s.ranks {
			if !holds && rs.arrs[arrScratch] != nil {
				t.Errorf("%s: rank %d made a scratch array that HoldsScratch does not count", name, rs.r)
			}
		}
		if !holds {
			without++
		}
	}
	if without == 0 {
		t.Error("every fixture holds a scratch array: packet plans should not")
	}
}
