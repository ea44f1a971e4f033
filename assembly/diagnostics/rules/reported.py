"""Rules whose findings come from reading, configuring and assembling the document.

The parser, the settings merge and the pipeline find these problems as they work (they
have to, to go on); each is still a rule of the table, with its code, severity and docs,
so it can be selected, ignored, re-graded and documented like any other.
"""

from __future__ import annotations

from collections.abc import Iterator

from assembly.diagnostics.core import Diagnostic, RuleContext


def _reported(ctx: RuleContext, code: str) -> Iterator[Diagnostic]:
    return (d for d in ctx.reported if d.code == code)


def syntax_error(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The document is not valid JSON, JSONL or YAML at this place.

    ## What it does
    Reports where the text stops being valid JSON, JSON Lines or YAML (an unterminated
    string, a missing comma, an unclosed bracket, invalid UTF-8) or is refused (nesting
    deeper than 256 levels). What could be read is still assembled.

    ## Why is this bad?
    A conversation that does not parse cannot be replayed, and whatever follows the error
    is missing from the assembled context.

    ## Example
    ```json
    [{"role": "user", "content": "hello}]
    ```
    The string is not terminated.
    """
    return _reported(ctx, "syntax-error")


def schema_error(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A value does not fit the conversation schema.

    ## What it does
    Reports messages without a `role` or with an unknown one (left out; the messages after
    it keep their ids), tool calls without a `function.name`, `files` on a non-user
    message, a summary without `summarizes_through`, duplicate message ids and other values
    of the wrong shape. The offending part is left out and the rest is read.

    ## Why is this bad?
    The part left out is not sent to the model, which is rarely what the author meant;
    providers reject many of these shapes outright.

    ## Example
    ```yaml
    messages:
      - {role: human, content: hi}
    ```
    `human` is not a role: use `user`.
    """
    return _reported(ctx, "schema-error")


def unknown_key(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A key that promptls does not read.

    ## What it does
    Reports a message key, or a document key, that is neither part of the conversation
    schema, nor an OpenAI chat-completions message or request field, nor one of the log
    fields real logs carry and that are never sent as input (`annotations`, `refusal`,
    `audio`, `reasoning_content`, `reasoning`, `thinking`, `weight`, …). The key is ignored.

    ## Why is this bad?
    An ignored key is usually a typo (`tool_call_idd`) or a field of another format: what it
    says does not reach the model, and the provider may refuse it.

    ## Example
    ```json
    {"role": "user", "content": "hi", "agent": "main"}
    ```
    `agent` is SWE-agent's own field: promptls ignores it.
    """
    return _reported(ctx, "unknown-key")


def schema_warning(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A value is read, but perhaps not as meant.

    ## What it does
    Reports values that are read with a caveat: tool call `arguments` that are not a JSON
    object (sent as written), a file with both `content` and `path` (`content` is used), a
    second JSON Lines header line (its keys are merged).

    ## Why is this bad?
    The assembled context may differ from what the author expected.

    ## Example
    ```json
    {"id": "call_1", "type": "function",
     "function": {"name": "search", "arguments": "{query: oslo}"}}
    ```
    """
    return _reported(ctx, "schema-warning")


def synthesized_tool_call_id(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A tool call without an id is given one.

    ## What it does
    A tool call with `"id": ""` (as Gemini's OpenAI-compatible endpoint writes them), without
    `id` (Ollama), or a legacy `function_call` is read as a tool call with the id
    `call_<message id>_<position>`; the tool response that answers it in conversation order
    (`"tool_call_id": ""`, no `tool_call_id`, or a legacy `function` message) gets the same id.
    The assembled `messages` send these ids, so they are valid for the provider.

    ## Why is this bad?
    It is not: this is information. The log as written cannot be sent again (OpenAI requires
    a non-empty id on every call and a `tool_call_id` on every response).

    ## Example
    ```json
    {"role": "assistant", "content": null,
     "tool_calls": [{"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    ```
    """
    return _reported(ctx, "synthesized-tool-call-id")


def stored_items_not_in_document(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A Responses request continues items OpenAI stored, which the document does not hold.

    ## What it does
    An OpenAI Responses request with `previous_response_id` (or `conversation`) is sent
    with the items of that stored response (or conversation) before its `input`: earlier
    turns, and the calls its `function_call_output` items answer. The finding, at that key,
    says so: what promptls reads, counts and assembles is the `input` alone.

    ## Why is this bad?
    It is not: this is information, the reason for what follows from it. A recorded
    continuation (the OpenAI Agents SDK and Microsoft's Agent Framework send them) often
    starts with tool outputs: their calls are stored, so promptls reports each as an
    orphan, and a turn without a user message cannot be assembled. Lint the whole
    conversation instead (its earlier requests' items and this `input`).

    ## Example
    ```json
    {"model": "gpt-4o-mini", "previous_response_id": "resp_0401…",
     "input": [{"type": "function_call_output", "call_id": "call_J7Yu…", "output": "72°F"}]}
    ```
    """
    return _reported(ctx, "stored-items-not-in-document")


def invalid_setting(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A setting has an invalid value or an unknown name.

    ## What it does
    Checks every setting — in `pyproject.toml`, `promptls.toml`, the editor, a template's
    front matter and the document's `settings` — against the schema, at the place that set
    it. The value from the sources below (ultimately the default) stays in force.

    ## Why is this bad?
    An ignored setting silently changes the budget or the provider format being checked.

    ## Example
    ```yaml
    settings:
      safety_margin: 1.5   # must be at least 0 and less than 1
    ```
    """
    return _reported(ctx, "invalid-setting")


def file_not_found(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A referenced file does not exist.

    ## What it does
    Reports a `system_prompt` template or a project file `path` that does not resolve to a
    file (relative to the document).

    ## Why is this bad?
    The system prompt or the project file is missing from the assembled context, so every
    token figure is off.

    ## Example
    ```yaml
    system_prompt: prompts/agnet.prompt.md
    ```
    """
    return _reported(ctx, "file-not-found")


def path_outside_workspace(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A referenced path leaves the workspace.

    ## What it does
    Refuses a `system_prompt` or project file path that resolves outside the workspace root,
    through `..` or a symbolic link.

    ## Why is this bad?
    Documents are often shared and linted in CI; a path outside the workspace reads files
    nobody reviewed (or secrets) into the context.

    ## Example
    ```yaml
    project_files:
      - {file_id: f1, filename: keys, path: ../../.ssh/id_rsa}
    ```
    """
    return _reported(ctx, "path-outside-workspace")


def document_too_large(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The document is too large to analyse safely.

    ## What it does
    Refuses a file over 64 MiB (its size is checked before it is read), and stops
    reading at one million YAML values (alias bombs expand exponentially), one million
    JSON tokens or 20,000 messages; what was read before the limit is still checked.
    A prompt template's body is read for sections, sentences and placeholders up to
    1 MiB (a warning where reading stopped; the whole text is still sent and counted).
    `docs/limits.md` lists every limit.

    ## Why is this bad?
    Such a document would take unbounded time and memory in the editor and in CI.

    ## Example
    ```yaml
    a: &a [x, x, x, x, x, x, x, x, x]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]   # … and so on
    ```
    """
    return _reported(ctx, "document-too-large")


def budget_overrun(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The fixed parts of the context do not fit in the budget.

    ## What it does
    Reports when the system prompt, custom agent prompt, project files and reminder
    together need more tokens than the budget leaves after the tool definitions
    (available = ⌊max_input_tokens × (1 − safety_margin)⌋ − tools), with each part's share.

    ## Why is this bad?
    Onyx raises "Not enough tokens available to construct message history": the turn fails
    before anything is sent.

    ## Example
    A 40,000-token system prompt with `max_input_tokens: 32000`.
    """
    return _reported(ctx, "budget-overrun")


def last_turn_over_budget(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The last user message and what follows it do not fit.

    ## What it does
    Reports when the last user message plus this turn's tool calls and results need more
    tokens than the history budget, with both figures and the difference.

    ## Why is this bad?
    Onyx raises "Not enough tokens to include the last user message and subsequent
    messages": nothing older can help, the turn fails.

    ## Example
    A 20,000-token tool result in the current turn with 16,000 tokens left for history.
    """
    return _reported(ctx, "last-turn-over-budget")


def no_user_message(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A non-empty conversation has no user message.

    ## What it does
    Reports a conversation whose current branch has messages but none from the user.

    ## Why is this bad?
    Onyx raises "No user message found in simple_chat_history": there is no turn to assemble.

    ## Example
    ```yaml
    messages:
      - {role: assistant, content: "How can I help?"}
    ```
    """
    return _reported(ctx, "no-user-message")


def internal_error(ctx: RuleContext) -> Iterator[Diagnostic]:
    """promptls itself failed on this document.

    ## What it does
    Reports an unexpected exception raised while reading, assembling or checking the
    document, at the document's head, with a one-line cause and where to report it. The
    other documents (and, in the editor, the last good findings) are unaffected.

    ## Why is this bad?
    Whatever the failing step would have found is missing, so the other findings of this
    document may be incomplete. It is a bug in promptls, not in the document: please report
    it with the document (or a trimmed copy) that triggers it.

    ## Example
    ```text
    internal error: RecursionError: maximum recursion depth exceeded (while checking);
    please report it at https://github.com/promptls/promptls/issues
    ```
    """
    return _reported(ctx, "internal-error")
