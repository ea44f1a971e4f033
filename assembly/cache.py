"""The provider cache prefix of an assembled context: what is cached and why it ends there.

Onyx marks the system prompt and the kept history as cacheable (``LayoutEntry.cache``;
``Assembly.cache_prefix_length`` counts the leading cacheable messages). Providers cache a
request by its exact leading bytes, the tool definitions first, so the prefix is reused on
the next request only while none of those bytes changes. ``boundary`` says where the prefix
ends and why; the hover shows it and the cache rules (``diagnostics/rules/cache.py``) use
``cached_tokens``. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assembly.assemble import Assembly

# Onyx's date text (``sysprompt.format_datetime``), e.g. ``Wednesday July 15, 2026``.
_DATE = re.compile(
    r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day (?:January|February|March|April|May|June|"
    r"July|August|September|October|November|December) \d{1,2}, \d{4}\b"
)

# Why the message right after the prefix is not cached, by its segment.
_WHY_NOT_CACHED = {
    "custom_agent": "Onyx sends the custom agent prompt after the history, again on every turn",
    "project_files": "the project files are sent after the history, again on every turn",
    "forgotten_files": "the forgotten-files listing is rebuilt on every turn",
    "last_user": "it is this turn's user message, new on every request",
    "this_turn": "it belongs to this turn's tool cycle",
    "reminder": "the reminder is sent after this turn's messages, on every request",
    "history": "it is after a message that is not cacheable",
}


@dataclass(frozen=True, slots=True)
class Boundary:
    """The cache prefix of one assembly, told in words."""

    n_cached: int  # leading messages marked cacheable
    cached_tokens: int  # their tokens plus the tool definitions'
    first_id: str | None  # the first message after the prefix
    reason: str  # why that message is not cached
    caveats: tuple[str, ...]  # what makes even the cached part change between requests

    def markdown(self) -> str:
        if not self.n_cached:
            return "No cacheable prefix: the assembled context has no system prompt or history."
        first = "message" if self.n_cached == 1 else f"{self.n_cached:,} messages"
        head = (
            f"Cacheable prefix: the tool definitions and the first {first}, "
            f"{self.cached_tokens:,} tokens."
        )
        if self.first_id is not None:
            head += f" It ends before `{self.first_id}`: {self.reason}."
        return " ".join([head, *self.caveats])


def cached_tokens(a: Assembly) -> int:
    """Tokens of the cacheable prefix: the tool definitions and the cached messages."""
    if not a.cache_prefix_length:
        return 0
    return a.budget.tools + sum(e.tokens for e in a.layout[: a.cache_prefix_length])


def date_in_system(a: Assembly) -> bool:
    """Whether the assembled system prompt holds a date in Onyx's format."""
    return a.system_text is not None and _DATE.search(a.system_text) is not None


def boundary(a: Assembly) -> Boundary:
    """Where the prefix of ``a`` ends and why, and what changes it between requests."""
    n = a.cache_prefix_length
    nxt = a.layout[n] if n < len(a.layout) else None
    reason = _WHY_NOT_CACHED.get(nxt.segment, "it is not cacheable") if nxt else ""
    caveats = []
    if n and a.layout and a.layout[0].segment == "system" and date_in_system(a):
        caveats.append(
            "The system prompt holds today's date, so the whole prefix changes every day."
        )
    if n > 1 and a.dropped:
        caveats.append(
            "The budget cut drops older messages: as the conversation grows the cut moves "
            "forward, and the cached history after the system prompt changes on the next turn "
            "that drops another message."
        )
    return Boundary(n, cached_tokens(a), nxt.id if nxt else None, reason, tuple(caveats))
