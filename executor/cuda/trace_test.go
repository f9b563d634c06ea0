package cudaexec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/ir"
)

// TestTableOpsFollowTables: the names Timeline gives op-table entries
// line up with the tables the builder lays out, pipelines included.
func TestTableOpsFollowTables(t *testing.T) {
	checked := 0
	for _, f := range planFiles(t) {
		p := loadPlan(t, f)
		if checkPlan(p, false) != nil {
			continue
		}
		bs, ls, err := fakeBufs(p, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		e := &Executor{p: p}
		for r := range p.GPUs {
			tables, err := (&tableBuilder{p: p, rank: r, lay: ls[r], bufs: bs, reduce: ir.ReduceSum}).build()
			if err != nil {
				continue
			}
			names, err := e.tableOps(r)
			if err != nil {
				t.Fatal(err)
			}
			for b, tab := range tables {
				if len(names[b]) != len(tab.Ops) {
					t.Errorf("%s rank %d block %d: %d names for %d table ops", f, r, b, len(names[b]), len(tab.Ops))
				}
				for i, n := range names[b] {
					if i < len(tab.Ops) && n.name != ir.OpCode(tab.Ops[i].Code).String() {
						t.Errorf("%s rank %d block %d op %d: named %s, table has %s", f, r, b, i, n.name, ir.OpCode(tab.Ops[i].Code))
					}
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no plan checked")
	}
}

// TestTimelineChromeJSON: the GPU trace uses the CPU executor's names.
func TestTimelineChromeJSON(t *testing.T) {
	tl := &Timeline{Ops: []TraceOp{
		{Rank: 0, Block: 1, Op: "put", Path: "gpus[0].threadblocks[1].ops[0]", Window: -1, Start: 5000, End: 7000},
		{Rank: 1, Block: 0, Op: "re", Path: "gpus[1].threadblocks[0].ops[1].ops[0]", Window: 3, Start: 6000, End: 6000},
	}}
	b, err := tl.ChromeJSON()
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []struct {
			Name string `json:"name"`
			Ph   string `json:"ph"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"name":"rank 0"`, `"name":"rank 1"`, `"name":"block 1"`, `"name":"put","ph":"X","ts":0,"dur":2`, `"window":3`, `"ts":1,"dur":0.001`} {
		if !strings.Contains(s, want) {
			t.Errorf("trace lacks %s:\n%s", want, s)
		}
	}
	if len(f.TraceEvents) != 6 {
		t.Errorf("%d events, want 4 names and 2 slices", len(f.TraceEvents))
	}
}

func TestTimelineNeedsTrace(t *testing.T) {
	if _, err := (&Executor{}).Timeline(); err == nil {
		t.Error("Timeline without Options.Trace")
	}
}

// TestGPUTrace runs the traced instance of a plan twice and checks the
// timeline of the second launch: one record per table op of every block,
// in order, each with start <= end.
func TestGPUTrace(t *testing.T) {
	needGPU(t)
	for _, algo := range []string{"allreduce_twoshot", "allreduce_allpairs_packet", "allgather_direct"} {
		t.Run(algo, func(t *testing.T) {
			p, err := compileWith("../../algorithms/"+algo+".msccl", map[string]int64{"ranks": 4})
			if err != nil {
				t.Fatal(err)
			}
			gpuMu.Lock()
			defer gpuMu.Unlock()
			e, b, done := openAlloc(t, p, Options{Trace: 64}, 64<<10)
			defer done()
			for i := 0; i < 2; i++ {
				if err := e.Run(Call{Buffers: b, DType: ir.F32}); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Wait(nil); err != nil {
				t.Fatal(err)
			}
			tl, err := e.Timeline()
			if err != nil {
				t.Fatal(err)
			}
			if tl.Dropped != 0 {
				t.Errorf("%d records dropped", tl.Dropped)
			}
			want := 0
			for r := range p.GPUs {
				names, err := e.tableOps(r)
				if err != nil {
					t.Fatal(err)
				}
				for _, ops := range names {
					want += len(ops)
				}
				if tl.Launch[r] != 1 {
					t.Errorf("rank %d: recorded launch %d, want 1 (the second)", r, tl.Launch[r])
				}
			}
			if len(tl.Ops) != want {
				t.Errorf("%d records, want one per table op (%d)", len(tl.Ops), want)
			}
			for i, op := range tl.Ops {
				if op.End < op.Start || op.Start == 0 {
					t.Errorf("record %d: %+v", i, op)
				}
			}
			if _, err := tl.ChromeJSON(); err != nil {
				t.Error(err)
			}
		})
	}
}
