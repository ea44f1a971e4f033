"""An open document's state and a finished analysis of it: the values the session keeps
and the scheduler hands around (``server.lsp.session``, ``server.lsp.scheduler``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from assembly.diagnostics import Diagnostic
from assembly.host import Analysis, DocKind, PromptAnalysis
from assembly.rope import Rope
from server.lsp.convert import TextMap


@dataclass(frozen=True, slots=True)
class DocState:
    """One open document at one version (replaced on every change, never mutated)."""

    uri: str
    path: Path
    version: int | None
    text: Rope
    kind: DocKind
    # ``path.resolve()``, made once when the document opens (a change's state carries it):
    # what the analyses' dependencies are compared with, without a system call a keystroke.
    real: Path | None = None

    def __post_init__(self) -> None:
        if self.real is None:
            object.__setattr__(self, "real", self.path.resolve())

    @property
    def real_path(self) -> Path:
        """The document's resolved path."""
        assert self.real is not None  # (made in ``__post_init__``)
        return self.real


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A finished analysis of one state of a document (``generation``, see ``scheduler``).

    A failed analysis is a snapshot too: ``analysis`` None, ``failure`` its findings (an
    ``internal-error`` at the head and the last good findings moved into this text, marked
    stale) and ``last_good`` the newest snapshot with an analysis, which requests answer
    from meanwhile.
    """

    uri: str
    version: int | None
    text_map: TextMap
    analysis: Analysis | PromptAnalysis | None
    elapsed_s: float
    generation: int = 0
    failure: tuple[Diagnostic, ...] | None = None
    last_good: Snapshot | None = None
    # What publishing its findings serialized, for the next version's (``handlers.documents``):
    # each finding's JSON around its ranges.
    published: dict[object, tuple[bytes, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The findings to show for this document (in ``text_map``'s text)."""
        if self.analysis is not None:
            return self.analysis.diagnostics
        return self.failure or ()

    @property
    def other_texts(self) -> Mapping[str, str]:
        base = self.analysis or (self.last_good.analysis if self.last_good else None)
        return base.other_texts if base is not None else {}
