package ir

import (
	"bytes"
	"encoding/json"
)

// This is the reflect-based encoder Encode replaced, kept as the oracle
// that Encode's hand-written output must match byte for byte.
//
// The j* mirrors fix the key order of the emitted JSON to the one the
// upstream DSL writes, so plans diff cleanly against upstream ones.
type jPlan struct {
	Name               string `json:"name"`
	Collective         string `json:"collective"`
	Protocol           string `json:"protocol"`
	InPlace            bool   `json:"inplace"`
	ReuseResources     bool   `json:"reuse_resources"`
	GPUs               []jGPU `json:"gpus"`
	NumThreadsPerBlock int    `json:"num_threads_per_block"`
	DoubleScratch      bool   `json:"use_double_scratch_buffer"`
	BufferAlignment    int    `json:"buffer_alignment"`
	MinMessageSize     uint64 `json:"min_message_size"`
	MaxMessageSize     uint64 `json:"max_message_size"`
	SizeGranularity    uint64 `json:"size_granularity,omitempty"`
	UniformScratch     bool   `json:"uniform_scratch,omitempty"`
	Root               int    `json:"root,omitempty"`
	Peers              []int  `json:"peers,omitempty"`
}

type jGPU struct {
	ID            int        `json:"id"`
	InputChunks   int        `json:"input_chunks"`
	OutputChunks  int        `json:"output_chunks"`
	ScratchChunks int        `json:"scratch_chunks"`
	ThreadBlocks  []jTB      `json:"threadblocks"`
	Channels      []jChannel `json:"channels"`
	RemoteBuffers []jRemote  `json:"remote_buffers"`
	Semaphores    []jSem     `json:"semaphores"`
}

type jChannel struct {
	Buff        string      `json:"buff,omitempty"`
	ChannelType string      `json:"channel_type"`
	ConnectedTo *[]int      `json:"connected_to,omitempty"`
	BufferType  string      `json:"buffer_type,omitempty"`
	RankGroups  *[]jRankGrp `json:"rank_groups,omitempty"`
}

type jRankGrp struct {
	Size  int   `json:"size"`
	Ranks []int `json:"ranks"`
}

type jRemote struct {
	Rank               int      `json:"rank"`
	Type               string   `json:"type"`
	AccessChannelTypes []string `json:"access_channel_types"`
}

type jSem struct {
	InitValue int `json:"init_value"`
}

type jTB struct {
	ID               int       `json:"id"`
	Ops              []jOp     `json:"ops"`
	Channels         []jTBChan `json:"channels"`
	RemoteBufferRefs []jRBRef  `json:"remote_buffer_refs"`
}

type jTBChan struct {
	Buff        string `json:"buff,omitempty"`
	ChannelType string `json:"channel_type"`
	ChannelIDs  []int  `json:"channel_ids"`
}

type jRBRef struct {
	AccessChannelType string `json:"access_channel_type"`
	RemoteBufferIDs   []int  `json:"remote_buffer_ids"`
}

type jOp struct {
	Name         string `json:"name"`
	IterContext  *jIter `json:"iter_context,omitempty"`
	Ops          []jOp  `json:"ops,omitempty"`
	SrcBuff      []jRef `json:"src_buff,omitempty"`
	DstBuff      []jRef `json:"dst_buff,omitempty"`
	ChannelIDs   []int  `json:"channel_ids,omitempty"`
	ChannelType  string `json:"channel_type,omitempty"`
	ReduceOp     string `json:"reduce_op,omitempty"`
	SemaphoreIDs []int  `json:"semaphore_ids,omitempty"`
	BarrierID    *int   `json:"barrier_id,omitempty"`
	NumTBs       *int   `json:"num_threadblocks,omitempty"`
	TBGInfo      *jTBG  `json:"tbg_info,omitempty"`
}

type jRef struct {
	Type     string `json:"type,omitempty"`
	BufferID *int   `json:"buffer_id,omitempty"`
	SwitchID *int   `json:"switch_channel_id,omitempty"`
	Index    int    `json:"index"`
	Size     int    `json:"size"`
}

type jIter struct {
	UnitSize  int `json:"unit_size"`
	NumChunks int `json:"num_chunks"`
}

type jTBG struct {
	TBID    int `json:"tb_id"`
	TBGSize int `json:"tbg_size"`
}

func encodeReflect(p *Plan) ([]byte, error) {
	jp := jPlan{
		Name: p.Name, Collective: string(p.Collective), Protocol: string(p.Protocol),
		InPlace: p.InPlace, ReuseResources: p.ReuseResources,
		NumThreadsPerBlock: p.NumThreadsPerBlock, DoubleScratch: p.DoubleScratch,
		BufferAlignment: p.BufferAlignment, MinMessageSize: p.MinMessageSize, MaxMessageSize: p.MaxMessageSize, SizeGranularity: p.SizeGranularity, UniformScratch: p.UniformScratch,
		Root: p.Root, Peers: p.Peers,
		GPUs: make([]jGPU, len(p.GPUs)),
	}
	for i := range p.GPUs {
		jp.GPUs[i] = encodeGPU(&p.GPUs[i])
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jp); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func encodeGPU(g *GPU) jGPU {
	jg := jGPU{ID: g.ID, InputChunks: g.InputChunks, OutputChunks: g.OutputChunks, ScratchChunks: g.ScratchChunks,
		ThreadBlocks: []jTB{}, Channels: []jChannel{}, RemoteBuffers: []jRemote{}, Semaphores: []jSem{}}
	for _, c := range g.Channels {
		jc := jChannel{ChannelType: c.Type.String()}
		if c.Type == ChanSwitch {
			if c.BuffKey == "buff" {
				jc.Buff = c.BufferType.String()
			} else {
				jc.BufferType = c.BufferType.String()
			}
			groups := make([]jRankGrp, len(c.RankGroups))
			for i, rg := range c.RankGroups {
				groups[i] = jRankGrp{Size: rg.Size, Ranks: nonNil(rg.Ranks)}
			}
			jc.RankGroups = &groups
		} else {
			peers := nonNil(c.ConnectedTo)
			jc.ConnectedTo = &peers
		}
		jg.Channels = append(jg.Channels, jc)
	}
	for _, r := range g.RemoteBuffers {
		jr := jRemote{Rank: r.Rank, Type: r.Type.String(), AccessChannelTypes: []string{}}
		for _, t := range r.AccessChannelTypes {
			jr.AccessChannelTypes = append(jr.AccessChannelTypes, t.String())
		}
		jg.RemoteBuffers = append(jg.RemoteBuffers, jr)
	}
	for _, s := range g.Semaphores {
		jg.Semaphores = append(jg.Semaphores, jSem{InitValue: s.InitValue})
	}
	for i := range g.ThreadBlocks {
		tb := &g.ThreadBlocks[i]
		jt := jTB{ID: tb.ID, Ops: []jOp{}, Channels: []jTBChan{}, RemoteBufferRefs: []jRBRef{}}
		for _, c := range tb.Channels {
			jc := jTBChan{ChannelType: c.Type.String(), ChannelIDs: nonNil(c.ChannelIDs)}
			if c.Buff != BufNone {
				jc.Buff = c.Buff.String()
			}
			jt.Channels = append(jt.Channels, jc)
		}
		for _, r := range tb.RemoteBufferRefs {
			jt.RemoteBufferRefs = append(jt.RemoteBufferRefs, jRBRef{AccessChannelType: r.AccessChannelType.String(), RemoteBufferIDs: nonNil(r.RemoteBufferIDs)})
		}
		for j := range tb.Ops {
			jt.Ops = append(jt.Ops, encodeOp(&tb.Ops[j]))
		}
		jg.ThreadBlocks = append(jg.ThreadBlocks, jt)
	}
	return jg
}

func encodeOp(op *Op) jOp {
	jo := jOp{Name: op.Code.String(), ChannelIDs: op.ChannelIDs, ReduceOp: string(op.ReduceOp()), SemaphoreIDs: op.SemaphoreIDs()}
	if op.ChannelType != ChanNone {
		jo.ChannelType = op.ChannelType.String()
	}
	jo.SrcBuff = encodeRefs(op.Src)
	jo.DstBuff = encodeRefs(op.Dst)
	if t := op.TBG(); t != nil {
		jo.TBGInfo = &jTBG{TBID: t.TBID, TBGSize: t.TBGSize}
	}
	if op.Code == OpBarrier {
		id, n := op.BarrierID(), op.NumTBs()
		jo.BarrierID, jo.NumTBs = &id, &n
	}
	if op.Code == OpPipeline {
		if it := op.Iter(); it != nil {
			jo.IterContext = &jIter{UnitSize: it.UnitSize, NumChunks: it.NumChunks}
		}
		jo.Ops = []jOp{}
		body := op.Ops()
		for i := range body {
			jo.Ops = append(jo.Ops, encodeOp(&body[i]))
		}
	}
	return jo
}

func encodeRefs(refs []BufRef) []jRef {
	if len(refs) == 0 {
		return nil
	}
	out := make([]jRef, len(refs))
	for i, r := range refs {
		jr := jRef{Index: r.Index, Size: r.Size}
		switch r.Kind {
		case RefLocal:
			jr.Type = r.Type.String()
		case RefRemote:
			id := r.BufferID
			jr.BufferID = &id
		case RefSwitch:
			id := r.SwitchID
			jr.SwitchID = &id
		}
		out[i] = jr
	}
	return out
}
