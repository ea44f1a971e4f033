"""Building the system prompt, the custom agent prompt and the reminder (reference §5).

Placeholders are plain string substitution (never a template engine that can run code), in
Onyx's order: ``{{user.<key>}}``, ``{{REMINDER_TAG_DESCRIPTION}}``, ``{{CURRENT_DATETIME}}``
(appended as "Additional Information" when absent and the prompt is date-aware),
``{{CITATION_GUIDANCE}}``; then the User Information section, the citation block when it
was not placed, and the Tools guidance restricted to the tools offered this turn. The date
comes from the caller: this module never reads the clock.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from assembly import texts
from assembly.memo import TextMemo
from assembly.model import PromptTemplate
from assembly.prompts import parse_prompt
from assembly.text import TextRange

_USER_PLACEHOLDER = re.compile(r"\{\{\s*user\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_REMINDER_TAG = re.compile(r"\{\{\s*REMINDER_TAG_DESCRIPTION\s*\}\}")
_DATETIME = re.compile(r"\{\{\s*CURRENT_DATETIME\s*\}\}")
_CITATION = re.compile(r"\{\{\s*CITATION_GUIDANCE\s*\}\}")

KNOWN_PLACEHOLDERS = ("CURRENT_DATETIME", "CITATION_GUIDANCE", "REMINDER_TAG_DESCRIPTION")
# Onyx's allow-list of ``{{user.<key>}}`` keys (directory profile + basic identity): such a
# key always resolves, to "" when the user has no value, so a raw tag never reaches the model.
USER_PLACEHOLDER_KEYS = frozenset(
    {
        "country",
        "usage_location",
        "city",
        "state",
        "office_location",
        "department",
        "job_title",
        "company_name",
        "preferred_language",
        "timezone",
        "email",
        "name",
        "role",
    }
)
TOOLS_HEADING = "tools"


@dataclass(frozen=True, slots=True)
class PromptContext:
    """What prompt building needs to know about this turn."""

    today: dt.date
    tools: Collection[str]  # tool names offered this turn
    cite: bool  # citation guidance applies (project files loaded, or a citeable tool ran)
    datetime_aware: bool = True
    user_info: Mapping[str, Any] | None = None


@functools.lru_cache(maxsize=4)
def format_datetime(day: dt.date) -> str:
    """Return Onyx's date text, e.g. ``Wednesday July 15, 2026`` (remembered for the last
    days asked: ``strftime`` took 9 µs, twice a document, the same day every time)."""
    return f"{day:%A} {day:%B} {day:%d}, {day:%Y}"


def build_system_prompt(
    template: PromptTemplate, ctx: PromptContext, *, all_guidance: bool = False
) -> str:
    """Return the system prompt text the model receives.

    ``all_guidance`` keeps the guidance of every tool (the worst case used for reserving
    tokens, as Onyx's ``include_all_guidance``).
    """
    text = _drop_unavailable_tool_guidance(template, ctx.tools, all_guidance=all_guidance)
    text = _date_and_tags(text, ctx, append_date=ctx.datetime_aware)
    append_citation = False
    if _CITATION.search(text):
        text = _CITATION.sub(lambda _: texts.CITATION_GUIDANCE if ctx.cite else "", text)
    elif ctx.cite and texts.CITATION_GUIDANCE.strip() not in text:
        append_citation = True
    text += user_information_section(ctx.user_info)
    if append_citation:
        text += texts.CITATION_GUIDANCE
    return text


def build_replacement_system_prompt(text: str, ctx: PromptContext) -> str:
    """The custom prompt as system prompt: placeholders and date, no user info, no tools."""
    text = _date_and_tags(text, ctx, append_date=ctx.datetime_aware)
    return _CITATION.sub(lambda _: texts.CITATION_GUIDANCE if ctx.cite else "", text)


def build_custom_agent_prompt(text: str, ctx: PromptContext) -> str:
    """The custom agent prompt as a user message: placeholders only, never a date appended."""
    text = _date_and_tags(text, ctx, append_date=False)
    return _CITATION.sub(lambda _: texts.CITATION_GUIDANCE if ctx.cite else "", text)


def _date_and_tags(text: str, ctx: PromptContext, *, append_date: bool) -> str:
    """Onyx's first placeholder steps: user fields, the reminder tag, the date."""
    text = substitute_user_placeholders(text, ctx.user_info)
    text = _REMINDER_TAG.sub(lambda _: texts.REMINDER_TAG_DESCRIPTION, text)
    if _DATETIME.search(text):
        return _DATETIME.sub(lambda _: format_datetime(ctx.today), text)
    if append_date:
        text += texts.DATETIME_APPEND.format(datetime=format_datetime(ctx.today))
    return text


def substitute_user_placeholders(text: str, user_info: Mapping[str, Any] | None) -> str:
    """Replace ``{{user.key}}``: a key of ``user_info`` by its value, another key of Onyx's
    allow-list by "", any other key is left as is (so the author notices a typo)."""
    if "{{" not in text:
        return text
    info = user_info or {}

    def repl(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in info:
            return "" if key in USER_PLACEHOLDER_KEYS else m.group(0)
        value = info[key]
        return "" if value is None else str(value)

    return _USER_PLACEHOLDER.sub(repl, text)


def user_information_section(user_info: Mapping[str, Any] | None) -> str:
    """Return Onyx's ``# User Information`` section, or "" when there is nothing to say."""
    if not user_info:
        return ""
    parts: list[str] = []
    basic = [
        f"- {label}: {user_info[key]}"
        for key, label in (("name", "Name"), ("email", "Email"), ("role", "Role"))
        if user_info.get(key)
    ]
    if basic:
        parts.append("## Basic Information\n" + "\n".join(basic))
    org = user_info.get("organization")
    if isinstance(org, Mapping) and org:
        parts.append("## Organization Profile\n" + "\n".join(f"- {k}: {v}" for k, v in org.items()))
    team = user_info.get("team")
    if team:
        parts.append(f"## Team Information\n{team}")
    prefs = user_info.get("preferences")
    if prefs:
        parts.append(f"## User Preferences\n{prefs}")
    memories = user_info.get("memories")
    if isinstance(memories, list) and memories:
        parts.append("## User Memories\n" + "\n".join(f"- {m}" for m in memories))
    if not parts:
        return ""
    return "\n# User Information\n\n" + "\n".join(parts)


def guidance_sections(template: PromptTemplate) -> dict[str, int]:
    """Map tool name (lower case) -> index of its ``## <tool>`` section under ``# Tools``."""
    tools_idx = _tools_section(template)
    if tools_idx is None:
        return {}
    res: dict[str, int] = {}
    for i, s in enumerate(template.sections):
        if s.parent == tools_idx and s.kind == "heading":
            res.setdefault(tool_name_of_heading(s.title), i)
    return res


def tool_name_of_heading(title: str) -> str:
    return title.strip().strip("`").strip().lower()


def parse_prompt_text(text: str) -> PromptTemplate:
    """Parse any prompt text (inline or from a message) as a Markdown template.

    The last few texts parsed are remembered (a template is a pure function of its text,
    and nothing changes one): the pipeline and the prompt rules both parse a conversation's
    system prompt in one analysis, and an agent's logged conversations share theirs (a
    folder of them is linted one after the other; an editor checks the open ones). A
    prompt typed in keeps its last few versions (``assembly.memo``)."""
    return _PARSED.get(text, lambda: parse_prompt(text))


_PARSED: TextMemo[str, PromptTemplate] = TextMemo(8, 1 << 21)


def _tools_section(template: PromptTemplate) -> int | None:
    for i, s in enumerate(template.sections):
        if s.kind == "heading" and s.title.strip().lower() == TOOLS_HEADING:
            return i
    return None


def _drop_unavailable_tool_guidance(
    template: PromptTemplate, tools: Collection[str], *, all_guidance: bool
) -> str:
    """Return the template body without guidance for tools not offered this turn.

    A ``## <tool>`` section under ``# Tools`` whose tool is not offered is removed; when no
    tool at all is offered the whole ``# Tools`` section goes, as Onyx omits its Tools section
    when there are no tools.
    """
    body = template.body_range
    tools_idx = _tools_section(template)
    if tools_idx is None or all_guidance:
        return template.text[body.start : body.end]
    offered = {t.lower() for t in tools}
    cuts: list[TextRange] = []
    if not offered:
        cuts.append(template.sections[tools_idx].range)
    else:
        for s in template.sections:
            if (
                s.parent == tools_idx
                and s.kind == "heading"
                and tool_name_of_heading(s.title) not in offered
            ):
                cuts.append(s.range)
    if not cuts:
        return template.text[body.start : body.end]
    out: list[str] = []
    pos = body.start
    for cut in sorted(cuts):
        if cut.start < pos:
            continue
        out.append(template.text[pos : cut.start])
        pos = cut.end
    out.append(template.text[pos : body.end])
    return "".join(out)
