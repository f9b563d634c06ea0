package diag

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

type hang struct{}

func (hang) Error() string    { return "watchdog: 1 block(s) stuck" }
func (hang) DiagCode() string { return CodeWatchdog }

// A code survives any wrapping, the innermost specific code wins over a
// general one added on the way out, and errors without one have none.
func TestCodeOf(t *testing.T) {
	size := Errorc(CodeSizeRefused, "message size %d bytes is above the rule", 99)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("x"), ""},
		{"coded", size, CodeSizeRefused},
		{"wrapped twice", fmt.Errorf("rank 3: %w", fmt.Errorf("cudaexec: %w", size)), CodeSizeRefused},
		{"general over specific", WithCode(CodeCannotRun, fmt.Errorf("setup: %w", size)), CodeSizeRefused},
		{"general over plain", WithCode(CodeCannotRun, errors.New("nested pipeline")), CodeCannotRun},
		{"error type with a code", fmt.Errorf("launch: %w", hang{}), CodeWatchdog},
		{"diagnostics", Diagnostics{{Severity: Warning, Code: CodePlanSuspicious}, {Code: CodeOpsPerBlock}}.Err(), CodeOpsPerBlock},
	} {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("%s: CodeOf(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
	if WithCode(CodeCannotRun, nil) != nil {
		t.Error("WithCode(nil) is not nil")
	}
	if got := Errorc(CodeBadOptions, "--dtype: %w", errors.ErrUnsupported); !errors.Is(got, errors.ErrUnsupported) || got.Error() != "--dtype: unsupported operation" {
		t.Errorf("Errorc lost the wrapped error or changed the text: %v", got)
	}
}

// An executor's error goes through the one renderer: the terminal line
// is the error's text, the JSON line has its code; Diagnostics as an
// error render as themselves.
func TestFromError(t *testing.T) {
	err := fmt.Errorf("rank 1: %w", Errorc(CodeNotResident, "plan %q needs all 256 thread blocks resident", "ring"))
	ds := FromError(err, CodeCannotRun)
	var text, js bytes.Buffer
	if err := Render(&text, ds, Text); err != nil {
		t.Fatal(err)
	}
	if err := Render(&js, ds, JSON); err != nil {
		t.Fatal(err)
	}
	if want := "error: rank 1: plan \"ring\" needs all 256 thread blocks resident\n"; text.String() != want {
		t.Errorf("text %q, want %q", text.String(), want)
	}
	if want := `{"severity":"error","code":"exec.not-resident","summary":"rank 1: plan \"ring\" needs all 256 thread blocks resident"}` + "\n"; js.String() != want {
		t.Errorf("json %s, want %s", js.String(), want)
	}
	if ds := FromError(errors.New("x"), CodeCannotRun); len(ds) != 1 || ds[0].Code != CodeCannotRun {
		t.Errorf("an error without a code takes the fallback: %v", ds)
	}
	inner := Diagnostics{{Code: CodePlanInvalid, Summary: "a", Path: "gpus[0]"}, {Severity: Warning, Code: CodePlanSuspicious, Summary: "w"}}
	if ds := FromError(inner.Err(), CodeCannotRun); len(ds) != 1 || ds[0].Path != "gpus[0]" {
		t.Errorf("Diagnostics as an error: %v, want their errors with their paths", ds)
	}
	if FromError(nil, CodeCannotRun) != nil {
		t.Error("nil error gives diagnostics")
	}
}
