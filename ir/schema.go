package ir

import (
	"fmt"
	"sync"
	"unsafe"
)

// The plan's JSON schema, written once. Each JSON object of a plan has a
// schema: its keys in the order the upstream DSL writes them, and for each
// key the Go field it fills, whether it is required, when it belongs to
// the object at all, and when Encode leaves it out. Decode (decode.go) and
// Encode (encode.go) both walk these tables, so a new key is one line
// here; the reflect-based encoder in encode_ref_test.go is the
// independent oracle the tables are held to, byte for byte.
//
// A 1024-rank plan has millions of ops, and a table walk pays per key
// what hand-written code does not, so the rows are data wherever they
// can be: a plain field is a kind and an offset that Encode reads
// without a call (head.write), a condition on a one-byte enum (an op's
// code, a reference's kind) is compared in place (cond), and only rows
// that need code of their own (lists, nested objects, getters) are
// function values.

// kind says how a plain field is read and written.
type kind uint8

const (
	kCustom   kind = iota // the row's own dec and enc
	kInt                  // int: a non-negative count or index below 2^31
	kU64                  // uint64: a byte count
	kBool                 // bool
	kStr                  // string
	kChanType             // ChannelType, spelled "memory", "port", "switch"
	kBufType              // BufferType, spelled "i", "o", "s"
	kInts                 // []int
)

// cond is a condition on a one-byte enum of the object: the byte at off
// equals val (or, with neq, differs from it).
type cond struct {
	on, neq bool
	val     uint8
	off     uintptr
}

func (c *cond) holds(p unsafe.Pointer) bool {
	return (*(*uint8)(unsafe.Add(p, c.off)) == c.val) != c.neq
}

// head is the part of a row that does not depend on the object's type.
type head struct {
	key  string
	kind kind
	off  uintptr // plain kinds: the field's offset in the object
	// omitZero: Encode leaves the key out when its value is zero, empty
	// or nil (omitempty).
	omitZero bool
	// late fields are decoded after the others (and after the schema's
	// setup), because their condition or need reads another field.
	late bool
	// selects: the key says what the object is (an op's name); without
	// it the rest of the object is not read.
	selects bool
	is      cond // a condition as data; see field.when
}

// field is one key of a JSON object that decodes into a T.
type field[T any] struct {
	head
	// when and is say whether the key belongs to this T at all (nil, off:
	// always): Decode reads it only then (otherwise it is an unknown key,
	// warned about) and Encode writes it only then.
	when func(*T) bool
	// need says whether Decode reports the key as missing when it is
	// absent (nil: optional).
	need func(*T) bool
	dec  func(o *obj, path string, v any, t *T)
	// enc (kCustom rows) writes the key and its value, or nothing when
	// omitZero and the value is zero.
	enc func(w *jw, f *field[T], t *T)
}

// applies says whether the key belongs to t.
func (f *field[T]) applies(t *T) bool {
	return (!f.is.on || f.is.holds(unsafe.Pointer(t))) && (f.when == nil || f.when(t))
}

// conditional rows are decoded in the second round.
func (f *field[T]) conditional() bool { return f.is.on || f.when != nil || f.late }

// schema is the table of one JSON object.
type schema[T any] struct {
	fields []field[T]
	// setup runs between the two rounds of Decode: after the fields a
	// condition may read, before the conditional ones.
	setup func(o *obj, t *T)
}

// Builders for the table rows.
func (f field[T]) required() field[T]                      { f.need = always[T]; return f }
func (f field[T]) requiredIf(c func(*T) bool) field[T]     { f.need = c; return f }
func (f field[T]) lateRequiredIf(c func(*T) bool) field[T] { f.need, f.late = c, true; return f }
func (f field[T]) onlyIf(c func(*T) bool) field[T]         { f.when = c; return f }
func (f field[T]) omitEmpty() field[T]                     { f.omitZero = true; return f }
func (f field[T]) selector() field[T]                      { f.selects = true; return f }

// onlyIfIs and onlyIfNot are onlyIf for a one-byte enum of the object:
// the key belongs to it when the enum e (a field of proto) is, or is
// not, v.
func onlyIfIs[T any, E ~uint8](f field[T], proto *T, e *E, v E) field[T] {
	f.is = cond{on: true, val: uint8(v), off: offset(proto, e)}
	return f
}

func onlyIfNot[T any, E ~uint8](f field[T], proto *T, e *E, v E) field[T] {
	f = onlyIfIs(f, proto, e, v)
	f.is.neq = true
	return f
}

func always[T any](*T) bool { return true }

// begin writes f's key unless the value is zero and f leaves it out.
func (f *head) begin(w *jw, zero bool) bool {
	if zero && f.omitZero {
		return false
	}
	w.key(f.key)
	return true
}

// write writes the plain field at p (the object's field at f.off).
func (f *head) write(w *jw, p unsafe.Pointer) {
	switch f.kind {
	case kInt:
		if x := *(*int)(p); f.begin(w, x == 0) {
			w.int(x)
		}
	case kU64:
		if x := *(*uint64)(p); f.begin(w, x == 0) {
			w.u64(x)
		}
	case kBool:
		if x := *(*bool)(p); f.begin(w, !x) {
			w.bool(x)
		}
	case kStr:
		if x := *(*string)(p); f.begin(w, x == "") {
			w.str(x)
		}
	case kChanType:
		if x := *(*ChannelType)(p); f.begin(w, x == ChanNone) {
			w.str(x.String())
		}
	case kBufType:
		if x := *(*BufferType)(p); f.begin(w, x == BufNone) {
			w.str(x.String())
		}
	case kInts:
		if x := *(*[]int)(p); f.begin(w, len(x) == 0) {
			w.ints(x)
		}
	}
}

// offset is the offset of the field f inside proto. The types are the
// compiler's to check (f is a *V of the row's kind); that f lies inside
// proto is checked here, once, when the tables are built.
func offset[T, V any](proto *T, f *V) uintptr {
	off := uintptr(unsafe.Pointer(f)) - uintptr(unsafe.Pointer(proto))
	if off+unsafe.Sizeof(*f) > unsafe.Sizeof(*proto) {
		panic("ir: schema field outside its object")
	}
	return off
}

// acc names one Go value of a T: a struct field (by: its offset) or a
// getter/setter pair (via; the Op fields kept out of line).
type acc[T, V any] struct {
	by  bool
	off uintptr
	get func(*T) V
	set func(*T, V)
}

// by is the accessor of the field f of proto, a T.
func by[T, V any](proto *T, f *V) acc[T, V] { return acc[T, V]{by: true, off: offset(proto, f)} }

// via is the accessor of a getter and a setter.
func via[T, V any](get func(*T) V, set func(*T, V)) acc[T, V] {
	return acc[T, V]{get: get, set: set}
}

func (a acc[T, V]) load(t *T) V {
	if a.by {
		return *(*V)(unsafe.Add(unsafe.Pointer(t), a.off))
	}
	return a.get(t)
}

func (a acc[T, V]) store(t *T, v V) {
	if a.by {
		*(*V)(unsafe.Add(unsafe.Pointer(t), a.off)) = v
	} else {
		a.set(t, v)
	}
}

// custom is a row whose reading and writing are its own.
func custom[T any](key string, dec func(o *obj, path string, v any, t *T), enc func(w *jw, f *field[T], t *T)) field[T] {
	return field[T]{head: head{key: key}, dec: dec, enc: enc}
}

// plain is a row of kind k over the value a names, of k's Go type (the
// typed constructors below hold the two together). Decode reads it
// through a copy (head.read); Encode writes a struct field in place
// (head.write) and a getter's value through a copy.
func plain[T, V any](key string, k kind, a acc[T, V]) field[T] {
	f := custom(key, func(o *obj, path string, v any, t *T) {
		var x V
		if o.d.read(k, v, path, unsafe.Pointer(&x)) {
			a.store(t, x)
		}
	}, func(w *jw, f *field[T], t *T) {
		x := a.load(t)
		f.write(w, unsafe.Pointer(&x))
	})
	f.kind = k
	if a.by {
		f.off, f.enc = a.off, nil
	}
	return f
}

func intField[T any](key string, a acc[T, int]) field[T]    { return plain(key, kInt, a) }
func u64Field[T any](key string, a acc[T, uint64]) field[T] { return plain(key, kU64, a) }
func boolField[T any](key string, a acc[T, bool]) field[T]  { return plain(key, kBool, a) }
func strField[T any](key string, a acc[T, string]) field[T] { return plain(key, kStr, a) }
func intsField[T any](key string, a acc[T, []int]) field[T] { return plain(key, kInts, a) }
func chanTypeField[T any](key string, a acc[T, ChannelType]) field[T] {
	return plain(key, kChanType, a)
}
func bufTypeField[T any](key string, a acc[T, BufferType]) field[T] {
	return plain(key, kBufType, a)
}

// listField is an array of objects of schema s.
func listField[T, E any](key string, a acc[T, []E], s *schema[E]) field[T] {
	return custom(key, func(o *obj, path string, v any, t *T) {
		arr, ok := o.d.arrayValue(v, path)
		if !ok {
			return
		}
		// Empty reads as nil: what Encode leaves out decodes the same.
		var out []E
		if len(arr) > 0 {
			out = make([]E, len(arr))
		}
		for i, ev := range arr {
			decodeObject(o.d, s, ev, fmt.Sprintf("%s[%d]", path, i), &out[i])
		}
		a.store(t, out)
	}, func(w *jw, f *field[T], t *T) {
		if l := a.load(t); f.begin(w, len(l) == 0) {
			w.beginArr()
			for i := range l {
				w.elem()
				encodeObject(w, s, &l[i])
			}
			w.endArr()
		}
	})
}

// objField is an optional object of schema s, held by pointer (nil when
// absent).
func objField[T, E any](key string, a acc[T, *E], s *schema[E]) field[T] {
	return custom(key, func(o *obj, path string, v any, t *T) {
		e := new(E)
		if decodeObject(o.d, s, v, path, e) {
			a.store(t, e)
		}
	}, func(w *jw, f *field[T], t *T) {
		if e := a.load(t); f.begin(w, e == nil) {
			encodeObject(w, s, e)
		}
	})
}

// Prototypes whose fields the tables take offsets of (by).
var (
	protoBufRef          BufRef
	protoChannel         Channel
	protoGPU             GPU
	protoIterContext     IterContext
	protoOp              Op
	protoPlan            Plan
	protoRankGroup       RankGroup
	protoRemoteBuffer    RemoteBuffer
	protoRemoteBufferRef RemoteBufferRef
	protoSemaphore       Semaphore
	protoTBChannel       TBChannel
	protoTBGInfo         TBGInfo
	protoThreadBlock     ThreadBlock
)

// The tables, outermost first, built by buildSchemas.
var (
	planSchema            schema[Plan]
	gpuSchema             schema[GPU]
	channelSchema         schema[Channel]
	rankGroupSchema       schema[RankGroup]
	remoteBufferSchema    schema[RemoteBuffer]
	semaphoreSchema       schema[Semaphore]
	threadBlockSchema     schema[ThreadBlock]
	tbChannelSchema       schema[TBChannel]
	remoteBufferRefSchema schema[RemoteBufferRef]
	iterContextSchema     schema[IterContext]
	tbgInfoSchema         schema[TBGInfo]
	opSchema              schema[Op]
	bufRefSchema          schema[BufRef]

	schemaOnce sync.Once
)

// schemas builds the tables on first use (Decode, EncodeTo), not at
// package init: every process that links ir paid for them before main,
// even msccl-compile --version (docs/BENCHMARKS.md, "msccl-compile
// start-up").
func schemas() { schemaOnce.Do(buildSchemas) }

func buildSchemas() {
	planGPUs := by(&protoPlan, &protoPlan.GPUs)
	planPeers := by(&protoPlan, &protoPlan.Peers)
	chanBuf := by(&protoChannel, &protoChannel.BufferType)
	tbChanBuff := by(&protoTBChannel, &protoTBChannel.Buff)
	planSchema = schema[Plan]{fields: []field[Plan]{
		strField("name", by(&protoPlan, &protoPlan.Name)).required(),
		custom("collective", func(o *obj, path string, v any, p *Plan) {
			if s, ok := o.d.strValue(v, path); ok {
				p.Collective = Collective(s)
				if !knownCollective(p.Collective) {
					o.d.errorf(path, "unknown collective %q (want one of %s)", s, collectiveNames())
				}
			}
		}, func(w *jw, f *field[Plan], p *Plan) { f.begin(w, false); w.str(string(p.Collective)) }).required(),
		custom("protocol", func(o *obj, path string, v any, p *Plan) {
			if s, ok := o.d.strValue(v, path); ok {
				p.Protocol = Protocol(s)
				if p.Protocol != Simple && p.Protocol != LL {
					o.d.errorf(path, "unknown protocol %q (want \"Simple\" or \"LL\")", s)
				}
			}
		}, func(w *jw, f *field[Plan], p *Plan) { f.begin(w, false); w.str(string(p.Protocol)) }).required(),
		boolField("inplace", by(&protoPlan, &protoPlan.InPlace)).required(),
		boolField("reuse_resources", by(&protoPlan, &protoPlan.ReuseResources)),
		// EncodeTo writes the ranks itself, in parallel (planGPUs).
		listField("gpus", planGPUs, &gpuSchema).required(),
		intField("num_threads_per_block", by(&protoPlan, &protoPlan.NumThreadsPerBlock)),
		boolField("use_double_scratch_buffer", by(&protoPlan, &protoPlan.DoubleScratch)),
		intField("buffer_alignment", by(&protoPlan, &protoPlan.BufferAlignment)),
		u64Field("min_message_size", by(&protoPlan, &protoPlan.MinMessageSize)),
		u64Field("max_message_size", by(&protoPlan, &protoPlan.MaxMessageSize)),
		// Our keys, written only when they say something: absent means no
		// granularity, reference scratch geometry, root 0 and the
		// (r+1) mod n peer map, so plans without them encode as before.
		// The ranges of root and peers are Validate's (they need the gpus).
		u64Field("size_granularity", by(&protoPlan, &protoPlan.SizeGranularity)).omitEmpty(),
		boolField("uniform_scratch", by(&protoPlan, &protoPlan.UniformScratch)).omitEmpty(),
		intField("root", by(&protoPlan, &protoPlan.Root)).omitEmpty(),
		intsField("peers", planPeers).omitEmpty(),
	}}

	gpuSchema = schema[GPU]{fields: []field[GPU]{
		intField("id", by(&protoGPU, &protoGPU.ID)).required(),
		intField("input_chunks", by(&protoGPU, &protoGPU.InputChunks)).required(),
		intField("output_chunks", by(&protoGPU, &protoGPU.OutputChunks)).required(),
		intField("scratch_chunks", by(&protoGPU, &protoGPU.ScratchChunks)).required(),
		listField("threadblocks", by(&protoGPU, &protoGPU.ThreadBlocks), &threadBlockSchema).required(),
		listField("channels", by(&protoGPU, &protoGPU.Channels), &channelSchema),
		listField("remote_buffers", by(&protoGPU, &protoGPU.RemoteBuffers), &remoteBufferSchema),
		listField("semaphores", by(&protoGPU, &protoGPU.Semaphores), &semaphoreSchema),
	}}

	channelSchema = schema[Channel]{
		fields: []field[Channel]{
			// A switch channel names its buffer under "buffer_type" or,
			// in some plans, "buff"; BuffKey keeps which, so the plan
			// encodes as it came.
			bufTypeField("buff", chanBuf).required().onlyIf(func(c *Channel) bool {
				return c.Type == ChanSwitch && c.BuffKey == "buff"
			}).omitEmpty(),
			chanTypeField("channel_type", by(&protoChannel, &protoChannel.Type)).required(),
			intsField("connected_to", by(&protoChannel, &protoChannel.ConnectedTo)).required().
				onlyIf(func(c *Channel) bool { return c.Type != ChanSwitch }),
			bufTypeField("buffer_type", chanBuf).required().onlyIf(func(c *Channel) bool {
				return c.Type == ChanSwitch && c.BuffKey != "buff"
			}).omitEmpty(),
			listField("rank_groups", by(&protoChannel, &protoChannel.RankGroups), &rankGroupSchema).required().
				onlyIf(func(c *Channel) bool { return c.Type == ChanSwitch }),
		},
		setup: func(o *obj, c *Channel) {
			if c.Type == ChanSwitch {
				c.BuffKey = "buffer_type"
				if !o.has("buffer_type") && o.has("buff") {
					c.BuffKey = "buff"
				}
			}
		},
	}

	rankGroupSchema = schema[RankGroup]{fields: []field[RankGroup]{
		intField("size", by(&protoRankGroup, &protoRankGroup.Size)).required(),
		intsField("ranks", by(&protoRankGroup, &protoRankGroup.Ranks)).required(),
	}}

	remoteBufferSchema = schema[RemoteBuffer]{fields: []field[RemoteBuffer]{
		intField("rank", by(&protoRemoteBuffer, &protoRemoteBuffer.Rank)).required(),
		bufTypeField("type", by(&protoRemoteBuffer, &protoRemoteBuffer.Type)).required(),
		custom("access_channel_types", func(o *obj, path string, v any, r *RemoteBuffer) {
			a, _ := o.d.arrayValue(v, path)
			for i, t := range a {
				s, ok := t.(string)
				ct, known := ParseChannelType(s)
				if !ok || !known || ct == ChanNone || ct == ChanSwitch {
					o.d.errorf(fmt.Sprintf("%s[%d]", path, i), "expected \"memory\" or \"port\", got %s", kindOf(t))
				}
				r.AccessChannelTypes = append(r.AccessChannelTypes, ct)
			}
		}, func(w *jw, f *field[RemoteBuffer], r *RemoteBuffer) {
			f.begin(w, false)
			w.beginArr()
			for _, t := range r.AccessChannelTypes {
				w.elem()
				w.str(t.String())
			}
			w.endArr()
		}).required(),
	}}

	semaphoreSchema = schema[Semaphore]{fields: []field[Semaphore]{
		intField("init_value", by(&protoSemaphore, &protoSemaphore.InitValue)).required(),
	}}

	threadBlockSchema = schema[ThreadBlock]{fields: []field[ThreadBlock]{
		intField("id", by(&protoThreadBlock, &protoThreadBlock.ID)).required(),
		listField("ops", by(&protoThreadBlock, &protoThreadBlock.Ops), &opSchema).required(),
		listField("channels", by(&protoThreadBlock, &protoThreadBlock.Channels), &tbChannelSchema),
		listField("remote_buffer_refs", by(&protoThreadBlock, &protoThreadBlock.RemoteBufferRefs), &remoteBufferRefSchema),
	}}

	tbChannelSchema = schema[TBChannel]{fields: []field[TBChannel]{
		bufTypeField("buff", tbChanBuff).omitEmpty(),
		chanTypeField("channel_type", by(&protoTBChannel, &protoTBChannel.Type)).required(),
		intsField("channel_ids", by(&protoTBChannel, &protoTBChannel.ChannelIDs)).required(),
	}}

	remoteBufferRefSchema = schema[RemoteBufferRef]{fields: []field[RemoteBufferRef]{
		chanTypeField("access_channel_type", by(&protoRemoteBufferRef, &protoRemoteBufferRef.AccessChannelType)).required(),
		intsField("remote_buffer_ids", by(&protoRemoteBufferRef, &protoRemoteBufferRef.RemoteBufferIDs)).required(),
	}}

	iterContextSchema = schema[IterContext]{fields: []field[IterContext]{
		intField("unit_size", by(&protoIterContext, &protoIterContext.UnitSize)).required(),
		intField("num_chunks", by(&protoIterContext, &protoIterContext.NumChunks)).required(),
	}}

	tbgInfoSchema = schema[TBGInfo]{fields: []field[TBGInfo]{
		intField("tb_id", by(&protoTBGInfo, &protoTBGInfo.TBID)).required(),
		intField("tbg_size", by(&protoTBGInfo, &protoTBGInfo.TBGSize)).required(),
	}}

	// Ops and their buffer references last: an op's pipeline body is a
	// list of ops.
	info := func(op *Op) *OpInfo { return op.Code.Info() }
	pipeline := func(f field[Op]) field[Op] { return onlyIfIs(f, &protoOp, &protoOp.Code, OpPipeline) }
	barrier := func(f field[Op]) field[Op] { return onlyIfIs(f, &protoOp, &protoOp.Code, OpBarrier) }
	src := by(&protoOp, &protoOp.Src)
	dst := by(&protoOp, &protoOp.Dst)
	chanIDs := by(&protoOp, &protoOp.ChannelIDs)
	body := via((*Op).Ops, (*Op).SetOps)
	sems := via((*Op).SemaphoreIDs, (*Op).SetSemaphoreIDs)
	opSchema.fields = []field[Op]{
		custom("name", func(o *obj, path string, v any, op *Op) {
			name, ok := o.d.strValue(v, path)
			if !ok {
				o.stop = true
				return
			}
			code, known := LookupOp(name)
			if !known {
				o.d.errorf(path, "unknown op %q%s", name, suggestOp(name))
				// Read nothing else: the fields of an unknown op mean
				// nothing, and neither do their keys.
				o.stop, o.quiet = true, true
				return
			}
			op.Code = code
		}, func(w *jw, f *field[Op], op *Op) { f.begin(w, false); w.str(op.Code.String()) }).required().selector(),
		pipeline(objField("iter_context", via((*Op).Iter, (*Op).SetIter), &iterContextSchema)).required().omitEmpty(),
		pipeline(listField("ops", body, &opSchema)).required().omitEmpty(),
		listField("src_buff", src, &bufRefSchema).requiredIf(func(op *Op) bool { return info(op).Src.Min > 0 }).omitEmpty(),
		listField("dst_buff", dst, &bufRefSchema).requiredIf(func(op *Op) bool { return info(op).Dst.Min > 0 }).omitEmpty(),
		intsField("channel_ids", chanIDs).
			lateRequiredIf(func(op *Op) bool { return info(op).ChannelIDs.Has(op.ChannelType) }).omitEmpty(),
		chanTypeField("channel_type", by(&protoOp, &protoOp.ChannelType)).
			requiredIf(func(op *Op) bool { return info(op).Chans != MaskNone }).omitEmpty(),
		strField("reduce_op", via(func(op *Op) string { return string(op.ReduceOp()) },
			func(op *Op, s string) { op.SetReduceOp(ReduceOp(s)) })).omitEmpty(),
		intsField("semaphore_ids", sems).requiredIf(func(op *Op) bool { return info(op).Semaphores }).omitEmpty(),
		barrier(intField("barrier_id", via((*Op).BarrierID, func(op *Op, id int) { op.SetBarrier(id, op.NumTBs()) }))).required(),
		barrier(intField("num_threadblocks", via((*Op).NumTBs, func(op *Op, n int) { op.SetBarrier(op.BarrierID(), n) }))).required(),
		objField("tbg_info", via((*Op).TBG, (*Op).SetTBG), &tbgInfoSchema).omitEmpty(),
	}

	// A reference names its buffer by one of three keys; which one it has
	// decides its kind (setup).
	kind := func(f field[BufRef], k RefKind) field[BufRef] { return onlyIfIs(f, &protoBufRef, &protoBufRef.Kind, k) }
	refType := by(&protoBufRef, &protoBufRef.Type)
	bufRefSchema.fields = []field[BufRef]{
		kind(bufTypeField("type", refType), RefLocal).required().omitEmpty(),
		kind(intField("buffer_id", by(&protoBufRef, &protoBufRef.BufferID)), RefRemote).required(),
		kind(intField("switch_channel_id", by(&protoBufRef, &protoBufRef.SwitchID)), RefSwitch).required(),
		kind(custom("rank", func(o *obj, path string, v any, r *BufRef) {
			r.Rank, r.HasRank = o.d.intValue(v, path)
		}, func(w *jw, f *field[BufRef], r *BufRef) {
			if r.HasRank {
				f.begin(w, false)
				w.int(r.Rank)
			}
		}), RefSwitch),
		intField("index", by(&protoBufRef, &protoBufRef.Index)).required(),
		intField("size", by(&protoBufRef, &protoBufRef.Size)).required(),
	}
	bufRefSchema.setup = func(o *obj, r *BufRef) {
		switch {
		case o.has("buffer_id"):
			r.Kind = RefRemote
			// Upstream ignores "type" next to buffer_id; so do we, but
			// keep it out of the unknown-key warnings.
			o.used["type"] = true
		case o.has("switch_channel_id"):
			r.Kind = RefSwitch
		default:
			r.Kind = RefLocal
		}
	}
}
