"""Exceptions and diagnostics of the msccl package."""

from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a program, a plan or a proof.

    Programs have source positions (file, line, col: 1-based; 0 where none
    applies), plans JSON paths (path). code names the kind of problem and
    stays stable across releases (dsl.syntax, plan.invalid, proof.race,
    ...; the wording may change); message is the line msccl-compile
    prints. kind is set on proof findings: deadlock, race, unbalanced,
    wrong result, clobbered or error.
    """

    severity: str
    message: str
    summary: str = ""
    detail: str = ""
    file: str = ""
    line: int = 0
    col: int = 0
    end_line: int = 0
    end_col: int = 0
    path: str = ""
    code: str = ""
    kind: str = ""

    @classmethod
    def from_json(cls, d):
        return cls(
            severity=d.get("severity", "error"),
            message=d.get("message", ""),
            summary=d.get("summary", ""),
            detail=d.get("detail", ""),
            file=d.get("file", ""),
            line=d.get("line", 0),
            col=d.get("col", 0),
            end_line=d.get("end_line", 0),
            end_col=d.get("end_col", 0),
            path=d.get("path", ""),
            code=d.get("code", ""),
            kind=d.get("kind", ""),
        )

    # The keys of the module's JSON form (internal/diag: JSONDiagnostic),
    # in its order; empty values are left out, as there.
    _JSON_KEYS = ("severity", "code", "summary", "detail", "file", "line", "col", "end_line", "end_col", "path")

    def to_json(self):
        """The diagnostic as msccl-compile --json prints it (one line)."""
        import json
        d = {k: getattr(self, k) for k in self._JSON_KEYS if getattr(self, k) or k in ("severity", "code", "summary")}
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False)

    @property
    def is_error(self):
        return self.severity == "error"

    def __str__(self):
        return self.message


#: A proof finding is a diagnostic with a kind.
Finding = Diagnostic


class Error(Exception):
    """Base of the errors libmsccl reports."""

    def __init__(self, message, diagnostics: Optional[List[Diagnostic]] = None):
        super().__init__(message)
        self.message = message
        self.diagnostics = list(diagnostics or [])


class InvalidArgument(Error, ValueError):
    """An argument libmsccl refused (an unknown handle, a bad option)."""


class InternalError(Error):
    """A bug in libmsccl: a Go panic the library caught (the message has its
    stack). The process is fine; please report it."""


class RunError(Error):
    """A run failed, not its arguments: the watchdog stopped a collective
    that waited too long, or the communicator is closed or unusable after
    an earlier failure. Make a new communicator; this one is done."""


class CompileError(Error):
    """A schedule program did not compile. file, line, col and message are
    those of the first error; diagnostics has every one (warnings too)."""

    def __init__(self, message, diagnostics=None):
        super().__init__(message, diagnostics)
        first = next((d for d in self.diagnostics if d.is_error), None)
        self.file = first.file if first else ""
        self.line = first.line if first else 0
        self.col = first.col if first else 0
        self.summary = first.summary if first else message
        self.errors = [d for d in self.diagnostics if d.is_error]


class PlanError(Error):
    """A plan (JSON) that does not decode or validate; each diagnostic
    names its JSON path."""


class SelectError(Error, ValueError):
    """No plan of the selection table fits the request (a collective, rank
    count or size the library has no plan for)."""


class NotCorrect(Error):
    """A plan whose proof found problems; .result is the VerifyResult."""

    def __init__(self, message, result):
        super().__init__(message, result.findings)
        self.result = result
