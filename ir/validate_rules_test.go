package ir

import (
	"errors"
	"strings"
	"testing"
)

// portPlan is a 3-rank plan where rank 0 puts to ranks 1 and 2 over port
// channels; the rule tests below break it one field at a time.
func portPlan() *Plan {
	p := &Plan{Name: "port", Collective: AllGather, Protocol: Simple, BufferAlignment: 16, MaxMessageSize: ^uint64(0), NumThreadsPerBlock: 1024}
	for r := 0; r < 3; r++ {
		g := GPU{ID: r, InputChunks: 1, OutputChunks: 3, ScratchChunks: 2}
		var peers []int
		for q := 0; q < 3; q++ {
			if q != r {
				peers = append(peers, q)
				g.RemoteBuffers = append(g.RemoteBuffers, RemoteBuffer{Rank: q, Type: BufOutput, AccessChannelTypes: []ChannelType{ChanPort}})
			}
		}
		g.Channels = []Channel{{Type: ChanPort, ConnectedTo: peers}}
		tb := ThreadBlock{
			Channels:         []TBChannel{{Type: ChanPort, ChannelIDs: []int{0, 1}}},
			RemoteBufferRefs: []RemoteBufferRef{{AccessChannelType: ChanPort, RemoteBufferIDs: []int{0, 1}}},
			Ops: []Op{
				{Code: OpPut, ChannelType: ChanPort, ChannelIDs: []int{0, 1},
					Src: []BufRef{{Type: BufInput, Size: 1}, {Type: BufInput, Size: 1}},
					Dst: []BufRef{{Kind: RefRemote, BufferID: 0, Index: r, Size: 1}, {Kind: RefRemote, BufferID: 1, Index: r, Size: 1}}},
				{Code: OpSignal, ChannelType: ChanPort, ChannelIDs: []int{0, 1}},
				{Code: OpWait, ChannelType: ChanPort, ChannelIDs: []int{0, 1}},
				{Code: OpFlush, ChannelType: ChanPort, ChannelIDs: []int{0, 1}},
			},
		}
		g.ThreadBlocks = []ThreadBlock{tb}
		p.GPUs = append(p.GPUs, g)
	}
	return p
}

func TestPortPlanIsValid(t *testing.T) {
	if ds := Validate(portPlan()); len(ds) > 0 {
		t.Fatalf("base plan of the rule tests is not clean:\n%s", ds)
	}
}

func TestValidateRules(t *testing.T) {
	op0 := func(p *Plan) *Op { return &p.GPUs[0].ThreadBlocks[0].Ops[0] }
	tests := []struct {
		name   string
		base   string // fixture name, or "" for portPlan
		mutate func(p *Plan)
		want   string // one exact line of the diagnostics
	}{
		{"port channel leads elsewhere", "", func(p *Plan) { op0(p).ChannelIDs = []int{1, 0} },
			"error: gpus[0].threadblocks[0].ops[0].channel_ids[0]: port channel 1 leads to rank 2, but dst_buff[0] is in rank 1's memory"},
		{"port put needs a channel per dst", "", func(p *Plan) { op0(p).ChannelIDs = []int{0} },
			"error: gpus[0].threadblocks[0].ops[0].channel_ids: put over port channels sends dst_buff[k] through channel_ids[k], but has 1 channel_ids and 2 dst_buff refs"},
		{"remote buffer not reachable over the table's type", "", func(p *Plan) {
			p.GPUs[0].RemoteBuffers[1].AccessChannelTypes = []ChannelType{ChanMemory}
		}, "error: gpus[0].threadblocks[0].remote_buffer_refs[0].remote_buffer_ids[1]: remote buffer 1 is not accessible over port channels (its access_channel_types are [memory])"},
		{"remote buffer without a channel", "", func(p *Plan) {
			p.GPUs[0].RemoteBuffers[1].AccessChannelTypes = []ChannelType{ChanMemory}
		}, "error: gpus[0].remote_buffers[1].access_channel_types[0]: no memory channel connects rank 0 and rank 2, so the buffer cannot be reached over one"},
		{"17 remote buffers in a block", "", func(p *Plan) {
			ids := make([]int, 17)
			p.GPUs[1].ThreadBlocks[0].RemoteBufferRefs[0].RemoteBufferIDs = ids
		}, "error: gpus[1].threadblocks[0].remote_buffer_refs[0].remote_buffer_ids[16]: block uses more than 16 remote buffers over port channels; the upstream executor holds at most 16 per type"},
		{"port ppkt sends packets packed beforehand", "", func(p *Plan) {
			p.Protocol = LL
			op0(p).Code = OpPpkt
		}, "error: gpus[0].threadblocks[0].ops[0].src_buff[0].type: ppkt packets live in scratch (sized twice its payload for the flags), not in input"},
		{"signal without channel_ids", "", func(p *Plan) { p.GPUs[2].ThreadBlocks[0].Ops[1].ChannelIDs = nil },
			"error: gpus[2].threadblocks[0].ops[1]: signal over port channels needs channel_ids"},
		{"flush over memory", "", func(p *Plan) { p.GPUs[2].ThreadBlocks[0].Ops[3].ChannelType = ChanMemory },
			"error: gpus[2].threadblocks[0].ops[3].channel_type: flush cannot use memory channels (want port)"},
		{"flush on a channel without partner", "", func(p *Plan) { p.GPUs[1].Channels[0].ConnectedTo = []int{2} },
			"error: gpus[0].threadblocks[0].ops[3].channel_ids[0]: flush uses port channel 0 (gpu channel 0, to rank 1), which has no partner: rank 1 has only 0 port channels to rank 0, so nothing there answers it"},
		{"output ref without output chunks", "", func(p *Plan) { p.GPUs[1].OutputChunks = 0 },
			"error: gpus[0].threadblocks[0].ops[0].dst_buff[0]: rank 1's output has no chunks"},
		{"input and output both empty", "", func(p *Plan) { p.GPUs[2].InputChunks, p.GPUs[2].OutputChunks = 0, 0 },
			"error: gpus[2]: input_chunks and output_chunks are both 0: chunk geometry needs one of them"},
		{"threads per block", "", func(p *Plan) { p.NumThreadsPerBlock = 2048 },
			"error: num_threads_per_block: num_threads_per_block must be between 1 and 1024 (CUDA's limit), got 2048"},
		{"alignment", "", func(p *Plan) { p.BufferAlignment = 0 },
			"error: buffer_alignment: buffer_alignment must be positive, got 0"},
		{"message range", "", func(p *Plan) { p.MinMessageSize, p.MaxMessageSize = 10, 5 },
			"error: min_message_size: min_message_size 10 is above max_message_size 5: no message can use this plan"},
		{"no gpus", "", func(p *Plan) { p.GPUs = nil }, "error: gpus: plan has no gpus"},
		{"block id", "", func(p *Plan) { p.GPUs[1].ThreadBlocks[0].ID = 3 },
			"error: gpus[1].threadblocks[0].id: thread block at position 0 has id 3; blocks must be listed in id order"},
		{"invalid op code", "", func(p *Plan) { op0(p).Code = NumOps + 3 },
			"error: gpus[0].threadblocks[0].ops[0].name: invalid op code 33"},
		{"negative index", "", func(p *Plan) { op0(p).Src[1].Index = -1 },
			"error: gpus[0].threadblocks[0].ops[0].src_buff[1].index: index must not be negative, got -1"},
		{"zero size", "", func(p *Plan) { op0(p).Src[1].Size = 0 },
			"error: gpus[0].threadblocks[0].ops[0].src_buff[1].size: size must be at least 1 chunk, got 0"},
		{"channel_type on copy", "reduce.json", func(p *Plan) { op0(p).ChannelType = ChanMemory },
			"warning: gpus[0].threadblocks[0].ops[0].channel_type: copy takes no channel; channel_type is ignored"},
		{"reduce_op on copy", "reduce.json", func(p *Plan) { op0(p).SetReduceOp(ReduceMax) },
			"warning: gpus[0].threadblocks[0].ops[0].reduce_op: copy does not reduce; reduce_op is ignored"},
		{"copy with two sources", "reduce.json", func(p *Plan) { op0(p).Src = append(op0(p).Src, op0(p).Src[0]) },
			"error: gpus[0].threadblocks[0].ops[0].src_buff: copy takes at most 1 src_buff refs, got 2"},
		{"copy without destination", "reduce.json", func(p *Plan) { op0(p).Dst = nil },
			"error: gpus[0].threadblocks[0].ops[0]: copy needs dst_buff"},
		{"nop with buffers", "reduce.json", func(p *Plan) { p.GPUs[0].ThreadBlocks[0].Ops[1].Src = op0(p).Src },
			"error: gpus[0].threadblocks[0].ops[1].src_buff: nop takes no src_buff"},
		{"recspkt dst[2] must be remote", "allreduce_packet.json", func(p *Plan) {
			o := &p.GPUs[0].ThreadBlocks[0].Ops[1]
			o.Code = OpRecspkt
			o.Dst = []BufRef{o.Dst[0], {Type: BufScratch, Index: 3, Size: 1}, {Type: BufScratch, Index: 2, Size: 1}}
		}, "error: gpus[0].threadblocks[0].ops[1].dst_buff[2]: recspkt dst_buff[2] must be a remote buffer (buffer_id), got a local buffer (type)"},
		{"respkt over port", "allreduce_packet.json", func(p *Plan) { p.GPUs[0].ThreadBlocks[0].Ops[1].ChannelType = ChanPort },
			"error: gpus[0].threadblocks[0].ops[1].channel_type: respkt cannot use port channels (want memory)"},
		{"packet op in a pipeline", "allreduce_packet.json", func(p *Plan) {
			ops := p.GPUs[1].ThreadBlocks[1].Ops
			pipe := Op{Code: OpPipeline}
			pipe.SetIter(&IterContext{UnitSize: 1 << 20, NumChunks: 1})
			pipe.SetOps(ops)
			p.GPUs[1].ThreadBlocks[1].Ops = []Op{pipe}
		}, "error: gpus[1].threadblocks[1].ops[0].ops[0].name: respkt cannot run inside a pipeline: upstream's packet handlers ignore the pipeline window and would redo the whole range every iteration"},
		{"pipeline without iter_context", "reduce_nvls_pipeline.json", func(p *Plan) { p.GPUs[1].ThreadBlocks[0].Ops[5].SetIter(nil) },
			"error: gpus[1].threadblocks[0].ops[5]: pipeline needs iter_context"},
		{"switch ref out of range", "reduce_nvls.json", func(p *Plan) { p.GPUs[0].ThreadBlocks[0].Ops[5].Dst[0].SwitchID = 1 },
			"error: gpus[0].threadblocks[0].ops[5].dst_buff[0].switch_channel_id: switch channel 1 out of range, the block's switch channel table has 1 entry"},
		{"switch group without self", "reduce_nvls.json", func(p *Plan) { p.GPUs[0].Channels[1].RankGroups[0].Ranks = []int{1, 1} },
			"error: gpus[0].channels[1].rank_groups[0].ranks[1]: rank 1 listed twice"},
		{"too many semaphores on an op", "allreduce_pipeline.json", func(p *Plan) {
			p.GPUs[0].ThreadBlocks[0].Ops[0].Ops()[0].SetSemaphoreIDs(make([]int, 17))
		}, "error: gpus[0].threadblocks[0].ops[0].ops[0].semaphore_ids: sem_acquire names 17 semaphores; the upstream executor holds at most 16 per op"},
		{"sem_release without ids", "allreduce_pipeline.json", func(p *Plan) { p.GPUs[3].ThreadBlocks[2].Ops[0].Ops()[10].SetSemaphoreIDs(nil) },
			"error: gpus[3].threadblocks[2].ops[0].ops[10]: sem_release needs semaphore_ids"},
		{"64 ops counted with pipeline bodies", "allreduce_pipeline.json", func(p *Plan) {
			pipe := &p.GPUs[2].ThreadBlocks[0].Ops[0]
			body := pipe.Ops()
			for len(body) < 64 {
				body = append(body, Op{Code: OpNop})
			}
			pipe.SetOps(body)
		}, "error: gpus[2].threadblocks[0].ops: block has 65 ops counting pipeline bodies; the upstream executor holds at most 64 per block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p *Plan
			if tc.base == "" {
				p = portPlan()
			} else {
				p = loadFixture(t, "../testdata/peer-plans/"+tc.base)
			}
			tc.mutate(p)
			got := Validate(p).String()
			for _, line := range strings.Split(got, "\n") {
				if line == tc.want {
					return
				}
			}
			t.Errorf("want line\n%s\ngot:\n%s", tc.want, got)
		})
	}
}

func TestValidateNil(t *testing.T) {
	if ds := Validate(nil); !ds.HasErrors() {
		t.Fatal("Validate(nil) reported nothing")
	}
}

func TestValidateErr(t *testing.T) {
	p := portPlan()
	if err := Validate(p).Err(); err != nil {
		t.Fatalf("Validate(...).Err() on a valid plan: %v", err)
	}
	p.GPUs[1].ID = 0
	err := Validate(p).Err()
	var de *DiagError
	if !errors.As(err, &de) || len(de.Diags.Errors()) != 1 {
		t.Fatalf("Validate(...).Err() = %v, want one error", err)
	}
}
