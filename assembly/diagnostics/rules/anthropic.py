"""Rules for the structural requirements of Anthropic's Messages API.

They run when the provider is ``anthropic`` (the setting, or ``--provider anthropic``; an
Anthropic document sets it by default): ``formats.anthropic_out`` renders the assembled
context as a Messages request and reports every place where it had to repair the
structure the API requires; each rule here reports one kind of repair at the document
message it is about. ``anthropic-tool-result-placement`` also reports, for any provider,
a ``tool_result`` block written after other content of its Anthropic message (the reader
finds it).
"""

from __future__ import annotations

from collections.abc import Iterator

from assembly.diagnostics.core import Diagnostic, RuleContext, Severity, message_memo
from assembly.formats.anthropic_out import AnthropicRequest, Repair, render_assembly
from assembly.formats.detect import SourceFormat, message_nodes
from assembly.model import DocFormat, Message
from assembly.text import TextRange


def _request(ctx: RuleContext) -> AnthropicRequest | None:
    a = ctx.assembly
    if a is None or ctx.settings.provider != "anthropic" or not a.provider_messages:
        return None
    return message_memo(ctx).of_run("anthropic-request", a, lambda: render_assembly(a))


def _found(ctx: RuleContext, code: str, severity: Severity) -> Iterator[Diagnostic]:
    request = _request(ctx)
    a = ctx.assembly
    if request is None or a is None:
        return
    conv = ctx.conversation
    sources: dict[str, Message] = {}
    for e in a.layout:
        if e.message.source is not None and conv is not None:
            sources[e.id] = conv.locate(e.message.source)  # type: ignore[assignment]
    for r in request.repairs:
        if r.code != code:
            continue
        rng = _place(r, sources.get(r.id))
        if rng is not None:
            yield Diagnostic(code, severity, r.message, rng)


def _place(r: Repair, source: Message | None) -> TextRange | None:
    if source is None:
        return None
    if r.code in ("anthropic-unanswered-tool-use", "anthropic-tool-use-id"):
        for call in source.tool_calls:
            if call.id == r.call_id:
                return call.range
    if r.code == "anthropic-tool-result-placement" and source.tool_call_id_range is not None:
        return source.range
    return source.role_range or source.range


def _written_after_content(ctx: RuleContext) -> Iterator[Diagnostic]:
    """``tool_result`` blocks written after other content of their Anthropic message."""
    conv = ctx.conversation
    if conv is None or conv.source_format != SourceFormat.ANTHROPIC:
        return
    for node in message_nodes(conv.root, conv.format is DocFormat.JSONL):
        content = node.get("content") if node.is_object else None
        if content is None or not content.is_array:
            continue
        seen_other = False
        for block in content.items:
            kind = block.get("type") if block.is_object else None
            if kind is not None and kind.is_string and kind.value == "tool_result":
                if seen_other:
                    tid = block.get("tool_use_id")
                    which = f"the result of `{tid.value}`" if tid and tid.is_string else "a result"
                    yield Diagnostic(
                        "anthropic-tool-result-placement",
                        Severity.ERROR,
                        f"{which} must come before any other content of its message (the "
                        "API refuses a `tool_result` block after text, images or documents)",
                        block.range,
                    )
            else:
                seen_other = True


def tool_result_placement(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A tool result is not where the Anthropic Messages API takes it.

    ## What it does
    With the `anthropic` provider, reports a tool result that is not in the user turn right
    after the assistant turn of its `tool_use` (it is sent as `[Tool Result] id=…` text),
    and one that comes after other content of that turn (it is moved before it). In an
    Anthropic document, for any provider, also reports a `tool_result` block written after
    text, images or documents of its message.

    ## Why is this bad?
    The API answers such a request with a 400 error: a `tool_result` must answer a
    `tool_use` of the turn just before, and tool results come first in their turn.

    ## Example
    ```json
    {"role": "user", "content": [
      {"type": "text", "text": "Here you go"},
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]}
    ```
    Put the `tool_result` block first.
    """
    read = list(_written_after_content(ctx))
    yield from read
    at = {(d.range.start, d.range.end) for d in read}
    for d in _found(ctx, "anthropic-tool-result-placement", Severity.ERROR):
        if (d.range.start, d.range.end) not in at:  # the reader said it already
            yield d


def unanswered_tool_use(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A `tool_use` has no `tool_result` in the next user turn.

    ## What it does
    With the `anthropic` provider, reports every tool call of the assembled context whose
    result is not in the user turn right after it (the call is the last message, its
    result was dropped or summarized, or other messages come between). The call is sent
    as `[Tool Call] name=… id=… args=…` text so that the printed request stays valid.

    ## Why is this bad?
    The Messages API refuses a request with a `tool_use` block that is not answered
    immediately; OpenAI-compatible providers accept a pending call, so a log made for them
    can break when it is replayed against Claude.

    ## Example
    ```yaml
    - role: assistant
      tool_calls: [{id: c1, type: function, function: {name: search, arguments: "{}"}}]
    - {role: user, content: "never mind"}
    ```
    """
    return _found(ctx, "anthropic-unanswered-tool-use", Severity.ERROR)


def merged_turns(ctx: RuleContext) -> Iterator[Diagnostic]:
    """Two consecutive messages of one role become one Anthropic turn.

    ## What it does
    With the `anthropic` provider, reports a user message right after another user message
    (not a tool result, not an uploaded file, not a message promptls adds) and an assistant
    message right after another assistant message. The printed request merges them into
    one turn of content blocks, as the API does.

    ## Why is this bad?
    The Messages API takes strictly alternating turns and merges consecutive ones; the
    model then reads two messages as one, which is rarely what a replayed log meant
    (a user who sent twice, or an assistant reply split in two).

    ## Example
    ```json
    [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Are you there?"}]
    ```
    """
    return _found(ctx, "anthropic-merged-turns", Severity.INFO)


def first_turn_not_user(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The Anthropic request starts with the assistant.

    ## What it does
    With the `anthropic` provider, reports the assistant message that opens the request's
    `messages` (the history starts with it, or the budget cut dropped the user message
    before it). The printed request is left as it is: the API takes it (a 2025 request
    that starts so, recorded in the real-log corpus, was answered).

    ## Why is this bad?
    Claude is trained on conversations that alternate from a user turn; an opening
    assistant turn is read as words the model said unprompted, and older API versions
    refused it ("first message must use the user role").

    ## Example
    ```json
    [{"role": "assistant", "content": "How can I help?"}, {"role": "user", "content": "Hi"}]
    ```
    """
    return _found(ctx, "anthropic-first-turn-not-user", Severity.INFO)


def empty_message(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A message has nothing the Anthropic Messages API can take.

    ## What it does
    With the `anthropic` provider, reports a message whose content is empty or only
    whitespace and that makes no tool call. It is left out of the printed request.

    ## Why is this bad?
    The API refuses empty text blocks and empty messages (only the final assistant turn
    may be empty); OpenAI-compatible providers accept them, so logs often have them.

    ## Example
    ```json
    {"role": "assistant", "content": ""}
    ```
    """
    return _found(ctx, "anthropic-empty-message", Severity.WARNING)


def tool_use_id(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A tool call id is sent renamed in the Anthropic request.

    ## What it does
    With the `anthropic` provider, reports a call id that is not made of letters, digits,
    `_` and `-`, or that an earlier call of the request already used (OpenAI logs reuse
    ids after an answer). The printed request sends it, and its result, under a new name
    (`call_1_2`).

    ## Why is this bad?
    Anthropic requires `tool_use` ids to match `^[a-zA-Z0-9_-]+$` and to be unique in a
    request; the log's ids cannot be replayed as they are.

    ## Example
    ```yaml
    - role: assistant
      tool_calls: [{id: "call:1", type: function, function: {name: f, arguments: "{}"}}]
    ```
    """
    return _found(ctx, "anthropic-tool-use-id", Severity.INFO)


def system_in_history(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A system message in the middle of the conversation, for Anthropic.

    ## What it does
    With the `anthropic` provider, reports a system message that is not the first message
    of the assembled context (the first one is the system prompt). The printed request
    sends its text as a user turn.

    ## Why is this bad?
    The Messages API has one system prompt, given apart (`system`); OpenAI logs often
    carry later system messages (notes an agent inserts), which Claude then reads as
    words of the user.

    ## Example
    ```json
    [{"role": "user", "content": "Hi"}, {"role": "system", "content": "Be terse now."},
     {"role": "user", "content": "And?"}]
    ```
    """
    return _found(ctx, "anthropic-system-in-history", Severity.INFO)
