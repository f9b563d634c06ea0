package main

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/msccl-go/msccl-go"
	"github.com/msccl-go/msccl-go/internal/size"
	"github.com/msccl-go/msccl-go/ir"
)

// verifyOptions are msccl_verify's options. Without size it is the proof
// (msccl.VerifyPlan: every size class of the plan's rule, symbolic and
// byte level, compiler.ProofLaunches launches), the same as msccl-compile
// compile runs; dtype picks the byte-level oracle's types and sizes the
// sizes instead of the rule's. With size it
// is one run of the CPU executor, as msccl-compile sim runs it.
type verifyOptions struct {
	Size     json.RawMessage `json:"size"`     // bytes: an integer, or a string such as "1MiB"
	DType    json.RawMessage `json:"dtype"`    // run: "f16"; proof: a list (or one name)
	Op       string          `json:"op"`       // run only: sum, min, max, prod
	Launches int             `json:"launches"` // run only; 0: compiler.ProofLaunches
	LLWidth  int             `json:"ll"`       // run only: 8 or 16; 0: 16
	Symbolic bool            `json:"symbolic"` // run only
	// Sizes, proof only: prove at these message sizes (bytes) instead of
	// the sizes that cover the plan's whole rule (msccl-compile compile
	// --verify-sizes).
	Sizes []int64 `json:"sizes"`
	// RequireConsistent, proof only: refuse a proven plan that is not
	// rank-consistent (verdict "not rank-consistent"), as msccl-compile
	// compile --require-consistent does.
	RequireConsistent bool `json:"require_consistent"`
}

// consistencyJSON is what a proof says about rank consistency
// (docs/consistency.md): consistent is null when it was not checked (a
// plan above compiler.ConsistencyMaxRanks ranks, unless required);
// summary is the line msccl-compile compile prints.
type consistencyJSON struct {
	Consistent *bool  `json:"consistent"`
	Identical  bool   `json:"identical,omitempty"`
	OrderFixed bool   `json:"order_fixed,omitempty"`
	Summary    string `json:"summary"`
	Reason     string `json:"reason,omitempty"` // why not, when it is not
}

// verdictJSON is msccl_verify's result.
type verdictJSON struct {
	OK       bool       `json:"ok"`
	Verdict  string     `json:"verdict"` // correct, deadlock, race, unbalanced, wrong result, error
	Mode     string     `json:"mode"`    // proof or run
	Runs     []string   `json:"runs"`    // the simulations made
	Findings []diagJSON `json:"findings"`
	// One run only.
	Size     int64  `json:"size,omitempty"`
	DType    string `json:"dtype,omitempty"`
	Op       string `json:"op,omitempty"`
	Launches int    `json:"launches,omitempty"`
	Steps    int64  `json:"steps,omitempty"`
	// A proof of a correct plan only.
	Consistency *consistencyJSON `json:"consistency,omitempty"`
}

func verify(h int64, options string) ([]byte, error) {
	e, err := table.plan(h)
	if err != nil {
		return nil, err
	}
	var o verifyOptions
	if strings.TrimSpace(options) != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(options)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, invalid("verify options: %v (keys: size, dtype, op, launches, ll, symbolic, sizes, require_consistent)", err)
		}
	}
	if len(o.Size) == 0 || string(o.Size) == "null" {
		return prove(e, o)
	}
	if o.Sizes != nil {
		return nil, invalid("verify: sizes picks the proof's sizes; size makes one run: give one of them")
	}
	if o.RequireConsistent {
		return nil, invalid("verify: require_consistent asks the proof; size makes one run: give one of them")
	}
	return runOnce(e, o)
}

func prove(e *planEntry, o verifyOptions) ([]byte, error) {
	if o.Op != "" || o.Launches != 0 || o.LLWidth != 0 || o.Symbolic {
		return nil, invalid("verify: op, launches, ll and symbolic choose one run; give its size too (without a size the proof covers every reduction and %d launches)", msccl.ProofLaunches)
	}
	names := []string{"f32", "bf16"} // msccl-compile compile's default
	if len(o.DType) > 0 && string(o.DType) != "null" {
		if err := json.Unmarshal(o.DType, &names); err != nil {
			var one string
			if json.Unmarshal(o.DType, &one) != nil {
				return nil, invalid("verify: dtype: want a type name or a list of them, got %s", o.DType)
			}
			names = []string{one}
		}
	}
	var dts []ir.DType
	for _, n := range names {
		dt, err := ir.ParseDType(n)
		if err != nil {
			return nil, invalid("verify: dtype: %v", err)
		}
		dts = append(dts, dt)
	}
	for _, n := range o.Sizes {
		if n <= 0 {
			return nil, invalid("verify: sizes must be positive, got %d", n)
		}
	}
	if o.Sizes != nil && len(o.Sizes) == 0 {
		return nil, invalid("verify: sizes is empty (leave it out to cover the plan's whole size rule)")
	}
	v := msccl.VerifyPlanWith(e.plan, e.src, msccl.VerifyOptions{Sizes: o.Sizes, DTypes: dts, RequireConsistent: o.RequireConsistent})
	out := verdictToJSON(v, "proof")
	if v.ConsistencyLine != "" {
		cj := &consistencyJSON{Summary: v.ConsistencyLine, Reason: v.Inconsistent}
		if c := v.Consistency; c != nil {
			ok := c.Err() == nil
			cj.Consistent, cj.Identical, cj.OrderFixed = &ok, c.Identical, c.Fixed
			if !ok {
				cj.Reason = c.Err().Error()
			}
		}
		out.Consistency = cj
	}
	return encodeJSON(out), nil
}

// verdictToJSON is a verdict as msccl_verify returns it.
func verdictToJSON(v *msccl.Verdict, mode string) verdictJSON {
	out := verdictJSON{OK: v.OK, Verdict: v.Verdict, Mode: mode, Runs: v.Runs, Findings: []diagJSON{}, Steps: v.Steps}
	for _, f := range v.Findings {
		j := toJSON(f.Diagnostic)
		j.Kind = f.Kind
		out.Findings = append(out.Findings, j)
	}
	return out
}

func runOnce(e *planEntry, o verifyOptions) ([]byte, error) {
	var n int64
	var s string
	if json.Unmarshal(o.Size, &n) != nil {
		if json.Unmarshal(o.Size, &s) != nil {
			return nil, invalid("verify: size: want bytes as an integer or a string such as \"1MiB\", got %s", o.Size)
		}
		var err error
		if n, err = size.Parse(s); err != nil {
			return nil, invalid("verify: size: %v", err)
		}
	}
	if n <= 0 {
		return nil, invalid("verify: size must be positive, got %d", n)
	}
	dtName := "f32"
	if len(o.DType) > 0 && string(o.DType) != "null" {
		if err := json.Unmarshal(o.DType, &dtName); err != nil {
			return nil, invalid("verify: dtype: one run takes one type name, got %s", o.DType)
		}
	}
	dt, err := ir.ParseDType(dtName)
	if err != nil {
		return nil, invalid("verify: dtype: %v", err)
	}
	op := ir.ReduceOp(o.Op)
	switch op {
	case "", ir.ReduceSum, ir.ReduceMin, ir.ReduceMax, ir.ReduceProd:
	default:
		return nil, invalid("verify: op: unknown reduction %q (want sum, min, max or prod)", o.Op)
	}
	// None named: the plan's own (sum unless its reduce_op fixes one);
	// one it does not serve is the executor's refusal.
	if red, err := e.plan.RunReduce(op); err == nil {
		op = red
	}
	if o.Launches == 0 {
		o.Launches = msccl.ProofLaunches
	}
	if o.Launches < 1 {
		return nil, invalid("verify: launches must be at least 1, got %d", o.Launches)
	}
	if o.LLWidth == 0 {
		o.LLWidth = 16
	}
	if o.LLWidth != 8 && o.LLWidth != 16 {
		return nil, invalid("verify: ll must be 8 or 16, got %d", o.LLWidth)
	}
	// The host is someone's Python process, which the kernel would kill
	// part way through: SimulatePlan refuses before it allocates.
	v, err := msccl.SimulatePlan(e.plan, e.src, msccl.SimOptions{Size: n, DType: dt, Op: op, Launches: o.Launches, LLWidth: o.LLWidth, Symbolic: o.Symbolic})
	if err != nil {
		// A size outside the plan's rule, a plan the executor cannot set
		// up: the input's problem, in the executor's words.
		return nil, err
	}
	out := verdictToJSON(v, "run")
	out.Size, out.DType, out.Op, out.Launches = n, dt.String(), string(op), o.Launches
	if o.Symbolic {
		out.DType = "symbolic"
	}
	return encodeJSON(out), nil
}
