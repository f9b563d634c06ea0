package diag

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCodesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if c.Code == "" || c.Meaning == "" || seen[c.Code] {
			t.Errorf("code %q: empty, unexplained or listed twice", c.Code)
		}
		seen[c.Code] = true
	}
}

func TestString(t *testing.T) {
	for _, c := range []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{Summary: "s"}, "error: s"},
		{Diagnostic{Severity: Warning, Summary: "s", Detail: "d"}, "warning: s; d"},
		{Diagnostic{Summary: "s", Subject: Range{Start: Pos{Filename: "a.msccl", Line: 3, Col: 4}}}, "a.msccl:3:4: error: s"},
		{Diagnostic{Summary: "s", Subject: Range{Start: Pos{Line: 3, Col: 4}}}, "3:4: error: s"},
		{Diagnostic{Summary: "s", Path: "gpus[0]", Subject: Range{Start: Pos{Filename: "p.json"}}}, "p.json: error: gpus[0]: s"},
	} {
		if got := c.d.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.d, got, c.want)
		}
	}
}

func TestErrKeepsDiagnostics(t *testing.T) {
	ds := Diagnostics{
		{Severity: Warning, Code: CodePlanSuspicious, Summary: "w"},
		{Code: CodeOpsPerBlock, Summary: "e1", Count: 200, Max: 128},
		{Code: CodePlanInvalid, Summary: "e2"},
	}
	err := ds.Err()
	var de *Err
	if !errors.As(err, &de) || !de.Diags.Has(CodeOpsPerBlock) || !de.Diags[1].IsLimit() || de.Diags[2].IsLimit() {
		t.Fatalf("Err lost the diagnostics: %v", err)
	}
	if got := err.Error(); got != "error: e1\nerror: e2" {
		t.Errorf("Error() = %q; want the errors only, one a line", got)
	}
	if (Diagnostics{ds[0]}).Err() != nil {
		t.Error("warnings alone are no error")
	}
}

func TestRenderJSON(t *testing.T) {
	ds := Diagnostics{
		{Code: CodeSyntax, Summary: "syntax error: x", Detail: "d", Subject: Range{Start: Pos{Filename: "a.msccl", Line: 1, Col: 2}, End: Pos{Line: 1, Col: 5}}},
		{Severity: Warning, Code: CodeOpsPerBlock, Summary: "s", Path: "gpus[0]", Count: 3, Max: 2},
	}
	var b bytes.Buffer
	if err := Render(&b, ds, JSON); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per diagnostic, got %q", b.String())
	}
	var got JSONDiagnostic
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got != (JSONDiagnostic{Severity: "error", Code: CodeSyntax, Summary: "syntax error: x", Detail: "d", File: "a.msccl", Line: 1, Col: 2, EndLine: 1, EndCol: 5}) {
		t.Errorf("got %+v", got)
	}
	if want := `{"severity":"warning","code":"limit.ops-per-block","summary":"s","path":"gpus[0]","count":3,"max":2}`; lines[1] != want {
		t.Errorf("got %s, want %s", lines[1], want)
	}
	b.Reset()
	Render(&b, ds, Text)
	if b.String() != ds.String() {
		t.Errorf("Text render %q differs from String %q", b.String(), ds.String())
	}
}

func TestSuggest(t *testing.T) {
	for _, c := range []struct {
		name  string
		cands []string
		want  string
	}{
		{"signl", []string{"signal", "wait"}, `did you mean "signal"?`},
		{"zzzzzz", []string{"signal", "wait"}, ""},
		{"ab", []string{"ad", "ac"}, `did you mean "ac"?`},
		{"protocl", []string{"protocol", "instances"}, `did you mean "protocol"?`},
		{"xyz", []string{"protocol"}, ""},
		{"rnaks", []string{"ranks", "r"}, `did you mean "ranks"?`},
	} {
		if got := Suggest(c.name, c.cands); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMarshalJSONMatchesRender(t *testing.T) {
	d := Diagnostic{Code: CodeDeadlock, Summary: "s <x>", Path: "gpus[0]"}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var r bytes.Buffer
	Render(&r, Diagnostics{d}, JSON)
	var x, y JSONDiagnostic
	if json.Unmarshal(b, &x) != nil || json.Unmarshal(r.Bytes(), &y) != nil || x != y {
		t.Errorf("MarshalJSON %s, Render %s", b, r.String())
	}
}
