package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/msccl-go/msccl-go/internal/diag"
)

// Decode parses a plan strictly. Every problem is reported with the JSON
// path of the offending value; the plan is nil only when the input is not
// JSON at all. Unknown keys are warnings (newer upstream fields must not
// break old readers), everything else is an error. Decode does not run the
// cross-reference checks of Validate.
func Decode(data []byte) (*Plan, Diagnostics) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, Diagnostics{syntaxDiag(data, err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		off := dec.InputOffset()
		line, col := lineCol(data, off)
		return nil, Diagnostics{{Code: CodeSyntax, Subject: at(line, col), Summary: "unexpected data after the top-level JSON value"}}
	}
	d := &decoder{diagSink{code: CodeSchema}}
	p := d.plan(root)
	return p, d.ds
}

func syntaxDiag(data []byte, err error) Diagnostic {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, se.Offset)
		return Diagnostic{Code: CodeSyntax, Subject: at(line, col), Summary: "malformed JSON: " + se.Error()}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		line, col := lineCol(data, int64(len(data)))
		return Diagnostic{Code: CodeSyntax, Subject: at(line, col), Summary: "malformed JSON: unexpected end of input"}
	}
	return Diagnostic{Code: CodeSyntax, Subject: at(1, 1), Summary: "malformed JSON: " + err.Error()}
}

// at is the place line:col of the plan file (the caller names the file).
func at(line, col int) diag.Range {
	return diag.Range{Start: diag.Pos{Line: line, Col: col}}
}

func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

type decoder struct{ diagSink }

// obj reads the fields of one JSON object and remembers which keys it used,
// so that the rest can be reported.
type obj struct {
	d    *decoder
	path string
	m    map[string]any
	used map[string]bool
}

func (d *decoder) object(v any, path string) *obj {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "expected an object, got %s", kindOf(v))
		return nil
	}
	return &obj{d: d, path: path, m: m, used: map[string]bool{}}
}

func (o *obj) sub(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

func (o *obj) get(key string, required bool) (any, bool) {
	o.used[key] = true
	v, ok := o.m[key]
	if !ok {
		if required {
			o.d.errorf(o.path, "missing required field %q", key)
		}
		return nil, false
	}
	return v, true
}

func (o *obj) has(key string) bool { _, ok := o.m[key]; return ok }

func (o *obj) str(key string, required bool) (string, bool) {
	v, ok := o.get(key, required)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		o.d.errorf(o.sub(key), "expected a string, got %s", kindOf(v))
	}
	return s, ok
}

func (o *obj) boolean(key string, required bool) (bool, bool) {
	v, ok := o.get(key, required)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		o.d.errorf(o.sub(key), "expected true or false, got %s", kindOf(v))
	}
	return b, ok
}

// integer reads a non-negative int that fits in 32 bits (every count and
// index in a plan does).
func (o *obj) integer(key string, required bool) (int, bool) {
	v, ok := o.get(key, required)
	if !ok {
		return 0, false
	}
	return o.d.intValue(v, o.sub(key))
}

func (d *decoder) intValue(v any, path string) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		d.errorf(path, "expected a non-negative integer, got %s", kindOf(v))
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < 0 || i > math.MaxInt32 {
		d.errorf(path, "expected a non-negative integer below 2^31, got %s", n)
		return 0, false
	}
	return int(i), true
}

func (o *obj) u64(key string, required bool) (uint64, bool) {
	v, ok := o.get(key, required)
	if !ok {
		return 0, false
	}
	n, isNum := v.(json.Number)
	if !isNum {
		o.d.errorf(o.sub(key), "expected a non-negative integer, got %s", kindOf(v))
		return 0, false
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		o.d.errorf(o.sub(key), "expected a non-negative 64-bit integer, got %s", n)
		return 0, false
	}
	return u, true
}

func (o *obj) array(key string, required bool) ([]any, bool) {
	v, ok := o.get(key, required)
	if !ok {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		o.d.errorf(o.sub(key), "expected an array, got %s", kindOf(v))
	}
	return a, ok
}

func (o *obj) ints(key string, required bool) []int {
	a, ok := o.array(key, required)
	if !ok {
		return nil
	}
	out := make([]int, 0, len(a))
	for i, v := range a {
		n, ok := o.d.intValue(v, fmt.Sprintf("%s[%d]", o.sub(key), i))
		if ok {
			out = append(out, n)
		} else {
			out = append(out, -1)
		}
	}
	return out
}

// done warns about keys nobody read, in sorted order so output is stable.
func (o *obj) done() {
	var extra []string
	for k := range o.m {
		if !o.used[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		o.d.warnf(o.sub(k), "unknown field %q is ignored", k)
	}
}

func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + string(v)
	case string:
		return strconv.Quote(v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (d *decoder) plan(v any) *Plan {
	o := d.object(v, "")
	p := &Plan{BufferAlignment: 16, MaxMessageSize: math.MaxUint64, NumThreadsPerBlock: 1024}
	if o == nil {
		return p
	}
	p.Name, _ = o.str("name", true)
	if s, ok := o.str("collective", true); ok {
		p.Collective = Collective(s)
		if !knownCollective(p.Collective) {
			d.errorf("collective", "unknown collective %q (want one of %s)", s, collectiveNames())
		}
	}
	if s, ok := o.str("protocol", true); ok {
		p.Protocol = Protocol(s)
		if p.Protocol != Simple && p.Protocol != LL {
			d.errorf("protocol", "unknown protocol %q (want \"Simple\" or \"LL\")", s)
		}
	}
	p.InPlace, _ = o.boolean("inplace", true)
	p.ReuseResources, _ = o.boolean("reuse_resources", false)
	p.DoubleScratch, _ = o.boolean("use_double_scratch_buffer", false)
	if n, ok := o.integer("buffer_alignment", false); ok {
		p.BufferAlignment = n
	}
	if n, ok := o.u64("min_message_size", false); ok {
		p.MinMessageSize = n
	}
	if n, ok := o.u64("max_message_size", false); ok {
		p.MaxMessageSize = n
	}
	if n, ok := o.u64("size_granularity", false); ok {
		p.SizeGranularity = n
	}
	p.UniformScratch, _ = o.boolean("uniform_scratch", false)
	// Our keys: absent means root 0 and the (r+1) mod n peer map; their
	// ranges and the permutation are Validate's (they need the gpus).
	if n, ok := o.integer("root", false); ok {
		p.Root = n
	}
	if o.has("peers") {
		p.Peers = o.ints("peers", false)
	}
	if n, ok := o.integer("num_threads_per_block", false); ok {
		p.NumThreadsPerBlock = n
	}
	gpus, _ := o.array("gpus", true)
	for i, g := range gpus {
		p.GPUs = append(p.GPUs, d.gpu(g, fmt.Sprintf("gpus[%d]", i)))
	}
	o.done()
	return p
}

func knownCollective(c Collective) bool {
	for _, k := range Collectives {
		if k == c {
			return true
		}
	}
	return false
}

func (d *decoder) gpu(v any, path string) GPU {
	var g GPU
	o := d.object(v, path)
	if o == nil {
		return g
	}
	g.ID, _ = o.integer("id", true)
	g.InputChunks, _ = o.integer("input_chunks", true)
	g.OutputChunks, _ = o.integer("output_chunks", true)
	g.ScratchChunks, _ = o.integer("scratch_chunks", true)
	chans, _ := o.array("channels", false)
	for i, c := range chans {
		g.Channels = append(g.Channels, d.channel(c, fmt.Sprintf("%s.channels[%d]", path, i)))
	}
	rbs, _ := o.array("remote_buffers", false)
	for i, r := range rbs {
		g.RemoteBuffers = append(g.RemoteBuffers, d.remoteBuffer(r, fmt.Sprintf("%s.remote_buffers[%d]", path, i)))
	}
	sems, _ := o.array("semaphores", false)
	for i, s := range sems {
		sp := fmt.Sprintf("%s.semaphores[%d]", path, i)
		so := d.object(s, sp)
		var sem Semaphore
		if so != nil {
			sem.InitValue, _ = so.integer("init_value", true)
			so.done()
		}
		g.Semaphores = append(g.Semaphores, sem)
	}
	tbs, _ := o.array("threadblocks", true)
	for i, t := range tbs {
		g.ThreadBlocks = append(g.ThreadBlocks, d.threadBlock(t, fmt.Sprintf("%s.threadblocks[%d]", path, i)))
	}
	o.done()
	return g
}

func (d *decoder) chanType(o *obj, key string, required bool) ChannelType {
	s, ok := o.str(key, required)
	if !ok {
		return ChanNone
	}
	t, ok := ParseChannelType(s)
	if !ok {
		d.errorf(o.sub(key), "unknown channel type %q (want \"memory\", \"port\" or \"switch\")", s)
	}
	return t
}

func (d *decoder) bufType(o *obj, key string, required bool) BufferType {
	s, ok := o.str(key, required)
	if !ok {
		return BufNone
	}
	t, ok := parseBufferType(s)
	if !ok {
		d.errorf(o.sub(key), "unknown buffer type %q (want \"i\", \"o\" or \"s\")", s)
	}
	return t
}

func (d *decoder) channel(v any, path string) Channel {
	var c Channel
	o := d.object(v, path)
	if o == nil {
		return c
	}
	c.Type = d.chanType(o, "channel_type", true)
	if c.Type == ChanSwitch {
		c.BuffKey = "buffer_type"
		if !o.has("buffer_type") && o.has("buff") {
			c.BuffKey = "buff"
		}
		c.BufferType = d.bufType(o, c.BuffKey, true)
		groups, _ := o.array("rank_groups", true)
		for i, gv := range groups {
			gp := fmt.Sprintf("%s.rank_groups[%d]", path, i)
			go_ := d.object(gv, gp)
			var rg RankGroup
			if go_ != nil {
				rg.Size, _ = go_.integer("size", true)
				rg.Ranks = go_.ints("ranks", true)
				go_.done()
			}
			c.RankGroups = append(c.RankGroups, rg)
		}
	} else {
		c.ConnectedTo = o.ints("connected_to", true)
	}
	o.done()
	return c
}

func (d *decoder) remoteBuffer(v any, path string) RemoteBuffer {
	var r RemoteBuffer
	o := d.object(v, path)
	if o == nil {
		return r
	}
	r.Rank, _ = o.integer("rank", true)
	r.Type = d.bufType(o, "type", true)
	a, _ := o.array("access_channel_types", true)
	for i, t := range a {
		s, ok := t.(string)
		ct, known := ParseChannelType(s)
		if !ok || !known || ct == ChanNone || ct == ChanSwitch {
			d.errorf(fmt.Sprintf("%s.access_channel_types[%d]", path, i), "expected \"memory\" or \"port\", got %s", kindOf(t))
		}
		r.AccessChannelTypes = append(r.AccessChannelTypes, ct)
	}
	o.done()
	return r
}

func (d *decoder) threadBlock(v any, path string) ThreadBlock {
	var tb ThreadBlock
	o := d.object(v, path)
	if o == nil {
		return tb
	}
	tb.ID, _ = o.integer("id", true)
	chans, _ := o.array("channels", false)
	for i, cv := range chans {
		cp := fmt.Sprintf("%s.channels[%d]", path, i)
		co := d.object(cv, cp)
		var tc TBChannel
		if co != nil {
			tc.Type = d.chanType(co, "channel_type", true)
			tc.ChannelIDs = co.ints("channel_ids", true)
			if co.has("buff") {
				tc.Buff = d.bufType(co, "buff", false)
			}
			co.done()
		}
		tb.Channels = append(tb.Channels, tc)
	}
	refs, _ := o.array("remote_buffer_refs", false)
	for i, rv := range refs {
		rp := fmt.Sprintf("%s.remote_buffer_refs[%d]", path, i)
		ro := d.object(rv, rp)
		var rr RemoteBufferRef
		if ro != nil {
			rr.AccessChannelType = d.chanType(ro, "access_channel_type", true)
			rr.RemoteBufferIDs = ro.ints("remote_buffer_ids", true)
			ro.done()
		}
		tb.RemoteBufferRefs = append(tb.RemoteBufferRefs, rr)
	}
	ops, _ := o.array("ops", true)
	for i, ov := range ops {
		tb.Ops = append(tb.Ops, d.op(ov, fmt.Sprintf("%s.ops[%d]", path, i), false))
	}
	o.done()
	return tb
}

func (d *decoder) op(v any, path string, inPipeline bool) Op {
	var op Op
	o := d.object(v, path)
	if o == nil {
		return op
	}
	name, ok := o.str("name", true)
	if !ok {
		o.done()
		return op
	}
	code, known := LookupOp(name)
	if !known {
		d.errorf(path+".name", "unknown op %q%s", name, suggestOp(name))
		// Read nothing else: the fields of an unknown op mean nothing.
		return op
	}
	op.Code = code
	info := code.Info()
	if info.Chans != MaskNone || o.has("channel_type") {
		op.ChannelType = d.chanType(o, "channel_type", info.Chans != MaskNone)
	}
	if o.has("channel_ids") || info.ChannelIDs.Has(op.ChannelType) {
		op.ChannelIDs = o.ints("channel_ids", info.ChannelIDs.Has(op.ChannelType))
	}
	op.Src = d.refs(o, "src_buff", info.Src)
	op.Dst = d.refs(o, "dst_buff", info.Dst)
	if o.has("reduce_op") || info.Reduces {
		if s, ok := o.str("reduce_op", false); ok {
			op.SetReduceOp(ReduceOp(s))
		}
	}
	if o.has("tbg_info") {
		tv, _ := o.get("tbg_info", false)
		to := d.object(tv, o.sub("tbg_info"))
		if to != nil {
			t := &TBGInfo{}
			t.TBID, _ = to.integer("tb_id", true)
			t.TBGSize, _ = to.integer("tbg_size", true)
			op.SetTBG(t)
			to.done()
		}
	}
	if o.has("semaphore_ids") || info.Semaphores {
		op.SetSemaphoreIDs(o.ints("semaphore_ids", info.Semaphores))
	}
	if code == OpBarrier {
		id, _ := o.integer("barrier_id", true)
		n, _ := o.integer("num_threadblocks", true)
		op.SetBarrier(id, n)
	}
	if code == OpPipeline {
		iv, ok := o.get("iter_context", true)
		if ok {
			io := d.object(iv, o.sub("iter_context"))
			if io != nil {
				it := &IterContext{}
				it.UnitSize, _ = io.integer("unit_size", true)
				it.NumChunks, _ = io.integer("num_chunks", true)
				op.SetIter(it)
				io.done()
			}
		}
		inner, _ := o.array("ops", true)
		var body []Op
		for i, iv := range inner {
			body = append(body, d.op(iv, fmt.Sprintf("%s.ops[%d]", path, i), true))
		}
		op.SetOps(body)
	}
	o.done()
	return op
}

func (d *decoder) refs(o *obj, key string, spec Operand) []BufRef {
	if !o.has(key) {
		if spec.Min > 0 {
			o.d.errorf(o.path, "missing required field %q", key)
		}
		o.used[key] = true
		return nil
	}
	a, ok := o.array(key, false)
	if !ok {
		return nil
	}
	out := make([]BufRef, 0, len(a))
	for i, rv := range a {
		rp := fmt.Sprintf("%s[%d]", o.sub(key), i)
		ro := d.object(rv, rp)
		var r BufRef
		if ro != nil {
			switch {
			case ro.has("buffer_id"):
				r.Kind = RefRemote
				r.BufferID, _ = ro.integer("buffer_id", true)
				if ro.has("type") {
					// Upstream ignores "type" next to buffer_id; so do we,
					// but keep it out of the unknown-key warnings.
					ro.used["type"] = true
				}
			case ro.has("switch_channel_id"):
				r.Kind = RefSwitch
				r.SwitchID, _ = ro.integer("switch_channel_id", true)
			default:
				r.Kind = RefLocal
				r.Type = d.bufType(ro, "type", true)
			}
			r.Index, _ = ro.integer("index", true)
			r.Size, _ = ro.integer("size", true)
			ro.done()
		}
		out = append(out, r)
	}
	return out
}
