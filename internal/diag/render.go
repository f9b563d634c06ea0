package diag

import (
	"encoding/json"
	"io"
)

// Format is how Render writes diagnostics.
type Format uint8

const (
	// Text is one line per diagnostic, for people (Diagnostic.String).
	Text Format = iota
	// JSON is one JSON object per line (JSON Lines), for tools, in the
	// shape of JSONDiagnostic; the way rustc's --error-format=json reports.
	JSON
)

// JSONDiagnostic is the JSON form: stable keys, empty fields left out.
// The C ABI (capi) embeds it in the diagnostics it returns.
type JSONDiagnostic struct {
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Col      int    `json:"col,omitempty"`
	EndLine  int    `json:"end_line,omitempty"`
	EndCol   int    `json:"end_col,omitempty"`
	Path     string `json:"path,omitempty"`
	Count    int    `json:"count,omitempty"`
	Max      int    `json:"max,omitempty"`
}

// Render writes ds to w in format f. Every command that reports
// diagnostics prints them through here, so the terminal text and the
// JSON a tool reads always say the same thing.
func Render(w io.Writer, ds Diagnostics, f Format) error {
	if f == Text {
		_, err := io.WriteString(w, ds.String())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, d := range ds {
		if err := enc.Encode(d.ToJSON()); err != nil {
			return err
		}
	}
	return nil
}

// ToJSON is d in its JSON form.
func (d Diagnostic) ToJSON() JSONDiagnostic {
	s, e := d.Subject.Start, d.Subject.End
	return JSONDiagnostic{Severity: d.Severity.String(), Code: d.Code, Summary: d.Summary, Detail: d.Detail,
		File: s.Filename, Line: s.Line, Col: s.Col, EndLine: e.Line, EndCol: e.Col,
		Path: d.Path, Count: d.Count, Max: d.Max}
}

// MarshalJSON writes d in the shape Render's JSON lines have, so a
// diagnostic embedded in another document (msccl-compile sim --json)
// reads the same as one on its own.
func (d Diagnostic) MarshalJSON() ([]byte, error) { return json.Marshal(d.ToJSON()) }
