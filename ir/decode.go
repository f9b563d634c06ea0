package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"unsafe"

	"github.com/msccl-go/msccl-go/internal/diag"
	"github.com/msccl-go/msccl-go/internal/size"
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
	p := &Plan{BufferAlignment: 16, MaxMessageSize: math.MaxUint64, NumThreadsPerBlock: 1024}
	schemas()
	decodeObject(d, &planSchema, root, "", p)
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

// obj is one JSON object being decoded; it remembers which keys were
// read, so that the rest can be reported.
type obj struct {
	d    *decoder
	path string
	m    map[string]any
	used map[string]bool
	// stop: the rest of the object means nothing (an op without a usable
	// name); quiet: and its keys are not worth a warning either.
	stop, quiet bool
}

func (d *decoder) object(v any, path string) *obj {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "expected an object, got %s", kindOf(v))
		return nil
	}
	return &obj{d: d, path: path, m: m, used: make(map[string]bool, len(m))}
}

func (o *obj) sub(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

func (o *obj) has(key string) bool { _, ok := o.m[key]; return ok }

// decodeObject fills t from v by the table s, reporting at path; it says
// whether v was an object. Fields run in table order, those with a
// condition (when) or marked late in a second round after s.setup, so a
// condition may read what the first round decoded.
func decodeObject[T any](d *decoder, s *schema[T], v any, path string, t *T) bool {
	o := d.object(v, path)
	if o == nil {
		return false
	}
	for round := 0; round < 2 && !o.stop; round++ {
		if round == 1 && s.setup != nil {
			s.setup(o, t)
		}
		for i := range s.fields {
			f := &s.fields[i]
			if f.conditional() != (round == 1) || !f.applies(t) {
				continue
			}
			o.used[f.key] = true
			v, ok := o.m[f.key]
			if !ok {
				if f.need != nil && f.need(t) {
					d.errorf(o.path, "missing required field %q", f.key)
					o.stop = o.stop || f.selects
				}
				if o.stop {
					break
				}
				continue
			}
			f.dec(o, o.sub(f.key), v, t)
			if o.stop {
				break
			}
		}
	}
	if !o.quiet {
		o.done()
	}
	return true
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

// The readers of one JSON value at path; each reports a value of the
// wrong kind and says whether it got one.

func (d *decoder) strValue(v any, path string) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.errorf(path, "expected a string, got %s", kindOf(v))
	}
	return s, ok
}

func (d *decoder) boolValue(v any, path string) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		d.errorf(path, "expected true or false, got %s", kindOf(v))
	}
	return b, ok
}

// intValue reads a non-negative int that fits in 32 bits (every count and
// index in a plan does).
func (d *decoder) intValue(v any, path string) (int, bool) {
	n, ok := d.number(v, path, math.MaxInt32, "a non-negative integer below 2^31")
	return int(n), ok
}

// u64Value reads a byte count.
func (d *decoder) u64Value(v any, path string) (uint64, bool) {
	return d.number(v, path, math.MaxUint64, "a non-negative 64-bit integer")
}

// number reads a non-negative integer up to most (want says what that is).
func (d *decoder) number(v any, path string, most uint64, want string) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		d.errorf(path, "expected a non-negative integer, got %s", kindOf(v))
		return 0, false
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || u > most {
		d.errorf(path, "expected %s, got %s", want, n)
		return 0, false
	}
	return u, true
}

func (d *decoder) arrayValue(v any, path string) ([]any, bool) {
	a, ok := v.([]any)
	if !ok {
		d.errorf(path, "expected an array, got %s", kindOf(v))
	}
	return a, ok
}

// intsValue reads a list of non-negative ints; an entry that is not one
// reads as -1, so that the others keep their positions.
func (d *decoder) intsValue(v any, path string) []int {
	a, ok := d.arrayValue(v, path)
	if !ok {
		return nil
	}
	out := make([]int, len(a))
	for i, e := range a {
		n, ok := d.intValue(e, fmt.Sprintf("%s[%d]", path, i))
		if !ok {
			n = -1
		}
		out[i] = n
	}
	return out
}

// enumValue reads a string that parse maps to a T (a noun); want lists
// the spellings for the message.
func enumValue[T ~uint8](d *decoder, v any, path, noun string, parse func(string) (T, bool), want string) (T, bool) {
	s, ok := d.strValue(v, path)
	if !ok {
		return 0, false
	}
	t, ok := parse(s)
	if !ok {
		d.errorf(path, "unknown %s %q (want %s)", noun, s, want)
	}
	return t, ok
}

// read reads v as a value of kind k into *p (of k's Go type) and says
// whether it got one.
func (d *decoder) read(k kind, v any, path string, p unsafe.Pointer) bool {
	var ok bool
	switch k {
	case kInt:
		*(*int)(p), ok = d.intValue(v, path)
	case kU64:
		*(*uint64)(p), ok = d.u64Value(v, path)
	case kBool:
		*(*bool)(p), ok = d.boolValue(v, path)
	case kStr:
		*(*string)(p), ok = d.strValue(v, path)
	case kChanType:
		*(*ChannelType)(p), ok = enumValue(d, v, path, "channel type", ParseChannelType, `"memory", "port" or "switch"`)
	case kBufType:
		*(*BufferType)(p), ok = enumValue(d, v, path, "buffer type", parseBufferType, `"i", "o" or "s"`)
	case kInts:
		*(*[]int)(p), ok = d.intsValue(v, path), true
	}
	return ok
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

func knownCollective(c Collective) bool {
	for _, k := range Collectives {
		if k == c {
			return true
		}
	}
	return false
}

// PlanTooLargeError refuses a plan for its size in bytes, before it is
// decoded: decoding holds about DecodeBytesPerByte bytes of memory per
// byte of JSON, so an unbounded plan (or /dev/zero) would exhaust memory
// before any check ran.
type PlanTooLargeError struct {
	Name string
	Size int64 // -1: a stream, read up to Max+1 bytes
	Max  int64
}

func (e *PlanTooLargeError) Error() string {
	how := "is " + byteCount(e.Size)
	if e.Size < 0 {
		how = "holds more than " + byteCount(e.Max)
	}
	return fmt.Sprintf("%s %s, above the %s cap on plans (decoding would need about %d times that in memory)", e.Name, how, byteCount(e.Max), DecodeBytesPerByte)
}

// byteCount is size.Format with a unit on plain numbers.
func byteCount(n int64) string {
	s := size.Format(n)
	if s == strconv.FormatInt(n, 10) {
		s += " bytes"
	}
	return s
}

// checkPlanBytes refuses n bytes of plan above maxBytes (0 or less:
// DefaultMaxPlanBytes).
func checkPlanBytes(name string, n, maxBytes int64) error {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxPlanBytes
	}
	if n > maxBytes {
		return &PlanTooLargeError{Name: name, Size: n, Max: maxBytes}
	}
	return nil
}

// ReadPlanFile reads a plan file of at most maxBytes (0 or less:
// DefaultMaxPlanBytes). A regular file is refused by its size before it
// is read; anything else (a pipe, a device) is read up to the cap and
// refused there.
func ReadPlanFile(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if err := checkPlanBytes(path, fi.Size(), maxBytes); err != nil {
			return nil, err
		}
	}
	return ReadPlan(f, path, maxBytes)
}

// ReadPlan reads a plan from r, which name names in errors, stopping
// with a *PlanTooLargeError once it holds more than maxBytes (0 or less:
// DefaultMaxPlanBytes).
func ReadPlan(r io.Reader, name string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxPlanBytes
	}
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, &PlanTooLargeError{Name: name, Size: -1, Max: maxBytes}
	}
	return data, nil
}
