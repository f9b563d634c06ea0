package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/version"
	"github.com/msccl-go/msccl-go/ir"
)

// abiVersion changes whenever an export's signature or a result's JSON
// shape changes incompatibly, or exports a caller needs are added (2:
// msccl_comm_prepare, msccl_comm_select; 4: buffers, registrations,
// channels and kernels of docs/primitives.md; 5: msccl_verify's
// require_consistent option and consistency result); the Python package
// refuses a library whose number it was not written for.
const abiVersion = 5

func libVersion() string { return version.String("libmsccl") }

// diagJSON is one diagnostic of a compile, a plan load or a proof: the
// module's JSON form (diag.JSONDiagnostic: severity, code, summary, detail, file,
// line, col, end_line, end_col, path; 1-based positions, zero fields
// left out), plus the line msccl-compile prints and, for proof findings,
// the kind (compiler.FindingKind).
type diagJSON struct {
	diag.JSONDiagnostic
	Message string `json:"message"`
	Kind    string `json:"kind,omitempty"`
}

func toJSON(d diag.Diagnostic) diagJSON {
	return diagJSON{JSONDiagnostic: d.ToJSON(), Message: d.String()}
}

func toJSONs(ds diag.Diagnostics) []diagJSON {
	out := []diagJSON{}
	for _, d := range ds {
		out = append(out, toJSON(d))
	}
	return out
}

func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // our own types always encode
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// decodeParams reads compile parameters: a JSON object of integers.
func decodeParams(s string) (map[string]int64, error) {
	defs := map[string]int64{}
	if s == "" {
		return defs, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, invalid("parameters: want a JSON object of integers, got %q: %v", s, err)
	}
	for k, v := range raw {
		n, ok := v.(json.Number)
		if !ok {
			return nil, invalid("parameter %s: want an integer, got %v", k, v)
		}
		i, err := n.Int64()
		if err != nil {
			return nil, invalid("parameter %s: want an integer, got %s", k, n)
		}
		defs[k] = i
	}
	return defs, nil
}

// compileSource compiles a program. Diagnostics (warnings too) come back
// whether or not it compiled; h is 0 when it did not.
func compileSource(filename string, src []byte, params string) (h int64, diags []diagJSON, err error) {
	defs, err := decodeParams(params)
	if err != nil {
		return 0, nil, err
	}
	p, sm, ds := msccl.CompileSource(filename, src, defs)
	diags = toJSONs(ds)
	if p == nil || ds.HasErrors() {
		return 0, diags, fmt.Errorf("%s", firstError(ds))
	}
	return table.add(&planEntry{plan: p, src: sm}), diags, nil
}

// firstError is the error line a failed compile reports as its message;
// the diagnostics carry every one.
func firstError(ds diag.Diagnostics) string {
	n := 0
	first := ""
	for _, d := range ds {
		if d.IsError() {
			if n == 0 {
				first = d.String()
			}
			n++
		}
	}
	if n > 1 {
		first += fmt.Sprintf(" (and %d more errors)", n-1)
	}
	if first == "" {
		first = "compilation failed"
	}
	return first
}

// loadPlan decodes and validates plan JSON; file names it in diagnostics.
func loadPlan(file string, data []byte) (h int64, diags []diagJSON, err error) {
	p, ds, lerr := ir.Load(data)
	for i := range ds {
		ds[i].Subject.Start.Filename = file // as msccl-compile names them
	}
	diags = toJSONs(ds)
	if lerr != nil {
		return 0, diags, fmt.Errorf("%s: %w", file, lerr)
	}
	return table.add(&planEntry{plan: p}), diags, nil
}

// planJSON is the plan in the MSCCL++ schema, byte for byte what
// msccl-compile compile writes.
func planJSON(h int64) ([]byte, error) {
	e, err := table.plan(h)
	if err != nil {
		return nil, err
	}
	return ir.Encode(e.plan)
}

type sizeRuleJSON struct {
	Granularity int64  `json:"granularity"`
	Min         int64  `json:"min"`
	Max         *int64 `json:"max"` // null: unbounded
	Text        string `json:"text"`
	Why         string `json:"why"`
}

type planInfoJSON struct {
	Name          string        `json:"name"`
	Collective    string        `json:"collective"`
	Protocol      string        `json:"protocol"`
	Ranks         int           `json:"ranks"`
	InPlace       bool          `json:"inplace"`
	Root          int           `json:"root"`
	FromSource    bool          `json:"from_source"`
	SizeRule      *sizeRuleJSON `json:"size_rule"` // null: the plan serves no size (size_rule_error says why)
	SizeRuleError string        `json:"size_rule_error,omitempty"`
	ThreadBlocks  []int         `json:"threadblocks"` // per rank
	// Reduction is the one reduction the plan serves when its reduce_op
	// fixes one (ir.Plan.FixedReduce), "" when it serves every one;
	// ReductionError says why it serves none.
	Reduction      string `json:"reduction"`
	ReductionError string `json:"reduction_error,omitempty"`
}

func planInfo(h int64) ([]byte, error) {
	e, err := table.plan(h)
	if err != nil {
		return nil, err
	}
	p := e.plan
	info := planInfoJSON{Name: p.Name, Collective: string(p.Collective), Protocol: string(p.Protocol), Ranks: len(p.GPUs),
		InPlace: p.InPlace, Root: p.Root, FromSource: e.src != nil, ThreadBlocks: []int{}}
	for _, g := range p.GPUs {
		info.ThreadBlocks = append(info.ThreadBlocks, len(g.ThreadBlocks))
	}
	if red, err := p.FixedReduce(); err != nil {
		info.ReductionError = err.Error()
	} else {
		info.Reduction = string(red)
	}
	if r, err := p.SizeRule(); err != nil {
		info.SizeRuleError = err.Error()
	} else {
		sr := &sizeRuleJSON{Granularity: r.Granularity, Min: r.Min, Text: r.String(), Why: r.Why()}
		if r.Max != math.MaxInt64 {
			sr.Max = &r.Max
		}
		info.SizeRule = sr
	}
	return encodeJSON(info), nil
}

// selectPlan is msccl.SelectPlan: the library's (table "") or a selection
// table's plan for a collective, rank count and size, proven.
func selectPlan(table_, collective string, ranks, size int64) (int64, error) {
	if ranks < 1 || ranks > math.MaxInt32 {
		return 0, invalid("ranks must be at least 1, got %d", ranks)
	}
	if size <= 0 {
		return 0, invalid("message size must be positive, got %d", size)
	}
	p, err := msccl.SelectPlan(table_, collective, int(ranks), size)
	if err != nil {
		return 0, err
	}
	return table.add(&planEntry{plan: p}), nil
}
