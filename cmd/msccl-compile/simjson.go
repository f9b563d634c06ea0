package main

import (
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// The JSON verdict uses snake_case keys and names every place by its JSON
// path, so scripts can point back into the plan the same way humans do.
type jsonPlace struct {
	Path   string `json:"path"`
	Rank   int    `json:"rank"`
	Block  int    `json:"block"`
	Op     int    `json:"op"`
	Inner  int    `json:"inner"`
	OpName string `json:"op_name"`
	Source string `json:"source,omitempty"` // DSL position when compiled from source
}

type jsonAccess struct {
	jsonPlace
	Buffer     string `json:"buffer"`
	BufferRank int    `json:"buffer_rank"`
	Off        int64  `json:"off"`
	End        int64  `json:"end"`
	Write      bool   `json:"write"`
}

type jsonVerdict struct {
	Plan       string           `json:"plan"`
	Verdict    string           `json:"verdict"`
	Size       int64            `json:"size"`
	DType      string           `json:"dtype"`
	Op         string           `json:"op"`
	Launches   int              `json:"launches"`
	Steps      int64            `json:"steps"`
	Deadlocks  []jsonStuck      `json:"deadlocks"`
	Races      [][2]jsonAccess  `json:"races"`
	Unbalanced []jsonUnbalanced `json:"unbalanced"`
	Wrong      []jsonMismatch   `json:"wrong"`
	WrongTotal int              `json:"wrong_total"`
	Symbolic   bool             `json:"symbolic"`
	Findings   []jsonFinding    `json:"findings"`
	Clobbered  []jsonClobber    `json:"clobbered"`
	// Diagnostics are the findings above in the toolchain's one
	// diagnostic shape (the one --json of compile and check prints), with
	// the codes tools branch on.
	Diagnostics ir.Diagnostics `json:"diagnostics"`
}

type jsonFinding struct {
	Launch  int        `json:"launch"`
	Rank    int        `json:"rank"`
	Off     int64      `json:"off"`
	End     int64      `json:"end"`
	Elems   int        `json:"elems"`
	Writer  *jsonPlace `json:"writer"` // null: no op wrote it
	Explain string     `json:"explain"`
}

type jsonClobber struct {
	Launch int        `json:"launch"`
	Rank   int        `json:"rank"`
	Off    int64      `json:"off"`
	End    int64      `json:"end"`
	Writer *jsonPlace `json:"writer"`
}

type jsonStuck struct {
	jsonPlace
	Waiting string `json:"waiting"`
}

type jsonUnbalanced struct {
	jsonPlace
	Channel string `json:"channel"`
	Count   int    `json:"count"`
}

type jsonMismatch struct {
	Launch int    `json:"launch"`
	Rank   int    `json:"rank"`
	Off    int64  `json:"off"`
	Got    string `json:"got"`
	Want   string `json:"want"`
}

func toJSONVerdict(name string, opt cpu.Options, rep *cpu.Report, where func(cpu.Place) string) jsonVerdict {
	place := func(p cpu.Place) jsonPlace {
		jp := jsonPlace{Path: p.Path(), Rank: p.Rank, Block: p.Block, Op: p.Op, Inner: p.Inner, OpName: p.OpName}
		if where != nil {
			jp.Source = where(p)
		}
		return jp
	}
	access := func(a cpu.Access) jsonAccess {
		return jsonAccess{place(a.Place), a.Buffer.Long(), a.BufferRank, a.Off, a.End, a.Write}
	}
	v := jsonVerdict{Plan: name, Diagnostics: append(ir.Diagnostics{}, rep.Diagnostics()...), Verdict: rep.Verdict.String(), Size: opt.Size, DType: opt.DType.String(),
		Op: string(opt.Reduce), Launches: opt.Launches, Steps: rep.Steps, WrongTotal: rep.WrongTotal,
		Deadlocks: []jsonStuck{}, Races: [][2]jsonAccess{}, Unbalanced: []jsonUnbalanced{}, Wrong: []jsonMismatch{}}
	for _, s := range rep.Deadlocks {
		v.Deadlocks = append(v.Deadlocks, jsonStuck{place(s.Place), s.Waiting})
	}
	for _, r := range rep.Races {
		v.Races = append(v.Races, [2]jsonAccess{access(r.A), access(r.B)})
	}
	for _, u := range rep.Unbalanced {
		v.Unbalanced = append(v.Unbalanced, jsonUnbalanced{place(u.Place), u.Channel, u.Count})
	}
	for _, m := range rep.Wrong {
		v.Wrong = append(v.Wrong, jsonMismatch{m.Launch, m.Rank, m.Off, m.Got, m.Want})
	}
	v.Symbolic = opt.Symbolic
	v.Findings, v.Clobbered = []jsonFinding{}, []jsonClobber{}
	ptr := func(p *cpu.Place) *jsonPlace {
		if p == nil {
			return nil
		}
		jp := place(*p)
		return &jp
	}
	for _, f := range rep.Findings {
		v.Findings = append(v.Findings, jsonFinding{f.Launch, f.Rank, f.Off, f.End, f.Elems, ptr(f.Writer), f.Explain})
	}
	for _, c := range rep.Clobbered {
		v.Clobbered = append(v.Clobbered, jsonClobber{c.Launch, c.Rank, c.Off, c.End, ptr(c.Writer)})
	}
	return v
}
