package ir

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/par"
)

// Encode writes the plan as indented JSON in the upstream schema, keys in
// the order the upstream DSL writes them, so plans diff cleanly against
// upstream ones. The output is deterministic: the same plan always gives
// the same bytes (the same bytes encoding/json's Encoder with a two-space
// indent gives; a test holds the two together).
//
// It walks the schema tables (schema.go) with its own indenting writer
// rather than going through reflection, because a 1024-rank plan is about
// 1 GB of JSON: through reflection and a separate indentation pass that
// took 50 s on a 2-core machine, twenty times the compile. Ranks are
// encoded in parallel into their own buffers and written in rank order
// (EncodeTo).
func Encode(p *Plan) ([]byte, error) {
	var buf bytes.Buffer
	n := 4096
	for i := range p.GPUs {
		n += gpuBytes(&p.GPUs[i])
	}
	buf.Grow(n)
	if err := EncodeTo(&buf, p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EncodeTo streams Encode's bytes to out, a batch of ranks at a time, so
// that a large plan is never held twice.
func EncodeTo(out io.Writer, p *Plan) error {
	schemas()
	w := jw{}
	w.beginObj()
	fields := planSchema.fields
	gi := slices.IndexFunc(fields, func(f field[Plan]) bool { return f.key == "gpus" })
	encodeFields(&w, fields[:gi], p)
	// The ranks, encoded in parallel into buffers of their own and
	// written in rank order, a batch at a time. The buffers are
	// reused from batch to batch: a fresh one is zeroed memory,
	// which cost a third of the encoder's time.
	w.key(fields[gi].key)
	w.beginArr()
	workers := par.Workers(len(p.GPUs))
	batch := 4 * workers
	if workers == 1 {
		// One worker gains nothing from a batch: one buffer, reused
		// rank after rank, is all a small plan's encoding touches (every
		// fresh page is a fault in a short-lived process such as
		// msccl-compile's 8-rank compile).
		batch = 1
	}
	parts := make([][]byte, batch)
	for lo := 0; lo < len(p.GPUs); lo += batch {
		hi := min(lo+batch, len(p.GPUs))
		par.ForEach(workers, hi-lo, func(_, i int) {
			g := &p.GPUs[lo+i]
			pw := jw{ind: 2, b: parts[i][:0]}
			if n := gpuBytes(g); cap(pw.b) < n {
				pw.b = make([]byte, 0, n)
			}
			encodeObject(&pw, &gpuSchema, g)
			parts[i] = pw.b
		})
		for _, part := range parts[:hi-lo] {
			w.elem()
			if _, err := out.Write(w.b); err != nil {
				return err
			}
			w.b = w.b[:0]
			if _, err := out.Write(part); err != nil {
				return err
			}
		}
	}
	w.endArr()
	encodeFields(&w, fields[gi+1:], p)
	w.endObj()
	w.b = append(w.b, '\n')
	_, err := out.Write(w.b)
	return err
}

// encodeObject writes t as a JSON object by the table s.
func encodeObject[T any](w *jw, s *schema[T], t *T) {
	w.beginObj()
	encodeFields(w, s.fields, t)
	w.endObj()
}

// encodeFields writes the keys of t that fields name, each unless it
// does not belong to t or is left out. It is the encoder's inner loop,
// written out (field.applies inlined by hand) because the compiler does
// not inline across the generic instantiations.
func encodeFields[T any](w *jw, fields []field[T], t *T) {
	for i := range fields {
		f := &fields[i]
		if (f.is.on && !f.is.holds(unsafe.Pointer(t))) || (f.when != nil && !f.when(t)) {
			continue
		}
		if f.enc != nil {
			f.enc(w, f, t)
		} else {
			f.write(w, unsafe.Add(unsafe.Pointer(t), f.off))
		}
	}
}

// gpuBytes estimates a rank's JSON, about 200 bytes per op, so buffers
// sized by it rarely grow and copy.
func gpuBytes(g *GPU) int {
	n := 4096
	for _, tb := range g.ThreadBlocks {
		n += 200 * len(tb.Ops)
	}
	return n
}

// jw appends indented JSON: first[d] says whether the container open at
// depth d has no member yet.
type jw struct {
	b     []byte
	ind   int
	first []bool
}

// newlines is a newline and the deepest indentation a plan reaches.
var newlines = "\n" + strings.Repeat("  ", 32)

func (w *jw) nl() {
	if n := 1 + 2*w.ind; n <= len(newlines) {
		w.b = append(w.b, newlines[:n]...)
		return
	}
	w.b = append(w.b, '\n')
	for i := 0; i < w.ind; i++ {
		w.b = append(w.b, ' ', ' ')
	}
}

func (w *jw) open(c byte) {
	w.b = append(w.b, c)
	w.ind++
	w.first = append(w.first, true)
}

func (w *jw) close(c byte) {
	empty := w.first[len(w.first)-1]
	w.first = w.first[:len(w.first)-1]
	w.ind--
	if !empty {
		w.nl()
	}
	w.b = append(w.b, c)
}

func (w *jw) beginObj() { w.open('{') }
func (w *jw) endObj()   { w.close('}') }
func (w *jw) beginArr() { w.open('[') }
func (w *jw) endArr()   { w.close(']') }

// elem starts the next member of the innermost container.
func (w *jw) elem() {
	if f := &w.first[len(w.first)-1]; *f {
		*f = false
	} else {
		w.b = append(w.b, ',')
	}
	w.nl()
}

// key starts the next member of the innermost object; keys are ASCII
// identifiers.
func (w *jw) key(k string) {
	w.elem()
	w.b = append(append(append(w.b, '"'), k...), '"', ':', ' ')
}

func (w *jw) int(v int)    { w.b = strconv.AppendInt(w.b, int64(v), 10) }
func (w *jw) u64(v uint64) { w.b = strconv.AppendUint(w.b, v, 10) }
func (w *jw) bool(v bool)  { w.b = strconv.AppendBool(w.b, v) }

// str writes s as encoding/json does without HTML escaping: plain
// printable ASCII directly, anything else through encoding/json itself.
func (w *jw) str(s string) {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		w.b = append(w.b, '"')
		w.b = append(w.b, s...)
		w.b = append(w.b, '"')
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	w.b = append(w.b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

func (w *jw) ints(v []int) {
	w.beginArr()
	for _, x := range v {
		w.elem()
		w.int(x)
	}
	w.endArr()
}
