package ir

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/msccl-go/msccl-go/internal/par"
)

// Encode writes the plan as indented JSON in the upstream schema, keys in
// the order the upstream DSL writes them, so plans diff cleanly against
// upstream ones. The output is deterministic: the same plan always gives
// the same bytes (the same bytes encoding/json's Encoder with a two-space
// indent gives; a test holds the two together).
//
// It is written by hand because a 1024-rank plan is about 1 GB of JSON:
// through reflection and a separate indentation pass that took 50 s on a
// 2-core machine, twenty times the compile. Ranks are encoded in parallel
// into their own buffers and written in rank order (EncodeTo).
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
	w := jw{}
	w.beginObj()
	w.key("name")
	w.str(p.Name)
	w.key("collective")
	w.str(string(p.Collective))
	w.key("protocol")
	w.str(string(p.Protocol))
	w.key("inplace")
	w.bool(p.InPlace)
	w.key("reuse_resources")
	w.bool(p.ReuseResources)
	w.key("gpus")
	w.beginArr()
	workers := par.Workers(len(p.GPUs))
	batch := 4 * workers
	parts := make([][]byte, batch)
	for lo := 0; lo < len(p.GPUs); lo += batch {
		hi := min(lo+batch, len(p.GPUs))
		par.ForEach(workers, hi-lo, func(_, i int) {
			g := &p.GPUs[lo+i]
			pw := jw{ind: 2, b: make([]byte, 0, gpuBytes(g))}
			pw.gpu(g)
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
		clear(parts)
	}
	w.endArr()
	w.key("num_threads_per_block")
	w.int(p.NumThreadsPerBlock)
	w.key("use_double_scratch_buffer")
	w.bool(p.DoubleScratch)
	w.key("buffer_alignment")
	w.int(p.BufferAlignment)
	w.key("min_message_size")
	w.b = strconv.AppendUint(w.b, p.MinMessageSize, 10)
	w.key("max_message_size")
	w.b = strconv.AppendUint(w.b, p.MaxMessageSize, 10)
	if p.SizeGranularity != 0 {
		w.key("size_granularity")
		w.b = strconv.AppendUint(w.b, p.SizeGranularity, 10)
	}
	if p.UniformScratch {
		w.key("uniform_scratch")
		w.bool(true)
	}
	// Written only when they say something: absent means root 0 and the
	// (r+1) mod n peer map, so plans without them encode as before.
	if p.Root != 0 {
		w.key("root")
		w.int(p.Root)
	}
	if len(p.Peers) > 0 {
		w.key("peers")
		w.ints(p.Peers)
	}
	w.endObj()
	w.b = append(w.b, '\n')
	_, err := out.Write(w.b)
	return err
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
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':', ' ')
}

func (w *jw) int(v int)   { w.b = strconv.AppendInt(w.b, int64(v), 10) }
func (w *jw) bool(v bool) { w.b = strconv.AppendBool(w.b, v) }

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

// optStr writes k: v unless v is empty (omitempty).
func (w *jw) optStr(k, v string) {
	if v != "" {
		w.key(k)
		w.str(v)
	}
}

func (w *jw) ints(v []int) {
	w.beginArr()
	for _, x := range v {
		w.elem()
		w.int(x)
	}
	w.endArr()
}

func (w *jw) gpu(g *GPU) {
	w.beginObj()
	w.key("id")
	w.int(g.ID)
	w.key("input_chunks")
	w.int(g.InputChunks)
	w.key("output_chunks")
	w.int(g.OutputChunks)
	w.key("scratch_chunks")
	w.int(g.ScratchChunks)
	w.key("threadblocks")
	w.beginArr()
	for i := range g.ThreadBlocks {
		w.elem()
		w.threadBlock(&g.ThreadBlocks[i])
	}
	w.endArr()
	w.key("channels")
	w.beginArr()
	for i := range g.Channels {
		c := &g.Channels[i]
		w.elem()
		w.beginObj()
		if c.Type == ChanSwitch && c.BuffKey == "buff" {
			w.optStr("buff", c.BufferType.String())
		}
		w.key("channel_type")
		w.str(c.Type.String())
		if c.Type != ChanSwitch {
			w.key("connected_to")
			w.ints(c.ConnectedTo)
		} else {
			if c.BuffKey != "buff" {
				w.optStr("buffer_type", c.BufferType.String())
			}
			w.key("rank_groups")
			w.beginArr()
			for _, rg := range c.RankGroups {
				w.elem()
				w.beginObj()
				w.key("size")
				w.int(rg.Size)
				w.key("ranks")
				w.ints(rg.Ranks)
				w.endObj()
			}
			w.endArr()
		}
		w.endObj()
	}
	w.endArr()
	w.key("remote_buffers")
	w.beginArr()
	for _, r := range g.RemoteBuffers {
		w.elem()
		w.beginObj()
		w.key("rank")
		w.int(r.Rank)
		w.key("type")
		w.str(r.Type.String())
		w.key("access_channel_types")
		w.beginArr()
		for _, t := range r.AccessChannelTypes {
			w.elem()
			w.str(t.String())
		}
		w.endArr()
		w.endObj()
	}
	w.endArr()
	w.key("semaphores")
	w.beginArr()
	for _, s := range g.Semaphores {
		w.elem()
		w.beginObj()
		w.key("init_value")
		w.int(s.InitValue)
		w.endObj()
	}
	w.endArr()
	w.endObj()
}

func (w *jw) threadBlock(tb *ThreadBlock) {
	w.beginObj()
	w.key("id")
	w.int(tb.ID)
	w.key("ops")
	w.beginArr()
	for i := range tb.Ops {
		w.elem()
		w.op(&tb.Ops[i])
	}
	w.endArr()
	w.key("channels")
	w.beginArr()
	for _, c := range tb.Channels {
		w.elem()
		w.beginObj()
		if c.Buff != BufNone {
			w.optStr("buff", c.Buff.String())
		}
		w.key("channel_type")
		w.str(c.Type.String())
		w.key("channel_ids")
		w.ints(c.ChannelIDs)
		w.endObj()
	}
	w.endArr()
	w.key("remote_buffer_refs")
	w.beginArr()
	for _, r := range tb.RemoteBufferRefs {
		w.elem()
		w.beginObj()
		w.key("access_channel_type")
		w.str(r.AccessChannelType.String())
		w.key("remote_buffer_ids")
		w.ints(r.RemoteBufferIDs)
		w.endObj()
	}
	w.endArr()
	w.endObj()
}

func (w *jw) op(op *Op) {
	w.beginObj()
	w.key("name")
	w.str(op.Code.String())
	if op.Code == OpPipeline {
		if it := op.Iter(); it != nil {
			w.key("iter_context")
			w.beginObj()
			w.key("unit_size")
			w.int(it.UnitSize)
			w.key("num_chunks")
			w.int(it.NumChunks)
			w.endObj()
		}
		if body := op.Ops(); len(body) > 0 {
			w.key("ops")
			w.beginArr()
			for i := range body {
				w.elem()
				w.op(&body[i])
			}
			w.endArr()
		}
	}
	w.refs("src_buff", op.Src)
	w.refs("dst_buff", op.Dst)
	if len(op.ChannelIDs) > 0 {
		w.key("channel_ids")
		w.ints(op.ChannelIDs)
	}
	if op.ChannelType != ChanNone {
		w.key("channel_type")
		w.str(op.ChannelType.String())
	}
	w.optStr("reduce_op", string(op.ReduceOp()))
	if s := op.SemaphoreIDs(); len(s) > 0 {
		w.key("semaphore_ids")
		w.ints(s)
	}
	if op.Code == OpBarrier {
		w.key("barrier_id")
		w.int(op.BarrierID())
		w.key("num_threadblocks")
		w.int(op.NumTBs())
	}
	if t := op.TBG(); t != nil {
		w.key("tbg_info")
		w.beginObj()
		w.key("tb_id")
		w.int(t.TBID)
		w.key("tbg_size")
		w.int(t.TBGSize)
		w.endObj()
	}
	w.endObj()
}

func (w *jw) refs(k string, refs []BufRef) {
	if len(refs) == 0 {
		return
	}
	w.key(k)
	w.beginArr()
	for _, r := range refs {
		w.elem()
		w.beginObj()
		switch r.Kind {
		case RefLocal:
			w.optStr("type", r.Type.String())
		case RefRemote:
			w.key("buffer_id")
			w.int(r.BufferID)
		case RefSwitch:
			w.key("switch_channel_id")
			w.int(r.SwitchID)
		}
		w.key("index")
		w.int(r.Index)
		w.key("size")
		w.int(r.Size)
		w.endObj()
	}
	w.endArr()
}
