"""The JSON Schema of conversation documents, generated so it never drifts from the reader.

``assembly/data/conversation.schema.json`` ships in the package so that any JSON- or
YAML-aware editor validates ``*.conv.json`` / ``*.conv.yaml`` files without the language
server: through a document's ``"$schema"`` key (``CONVERSATION_SCHEMA_URL``) or by mapping
the file pattern to the packaged file. It is generated from this module:
``python -m server.schema > assembly/data/conversation.schema.json`` (``--path`` prints where
the installed copy is). The ``settings`` part is ``SettingsModel.model_json_schema()``.

The schema describes what ``assembly.reading.parse_conversation`` reads, never more: a
document it accepts reads without a ``schema-error`` (``tests/test_schema.py`` checks this
on the examples and fixtures). Where JSON Schema cannot say what the reader checks
(duplicate message ids, a ``parent`` that names no message) only the server reports it.
Non-standard ``enumDescriptions`` / ``errorMessage`` / ``patternErrorMessage`` keywords are
read by VS Code's JSON support and ignored by validators.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

from assembly.documents import LOG_MESSAGE_KEYS, REQUEST_BODY_KEYS, ROLE_ALIASES
from assembly.model import Role
from assembly.settings_model import SettingsModel
from server import jsonout
from server.schema_formats import FORMAT_ROOTS, format_defs

# Where the schema is published, for a document's `"$schema"` key (the file in the repository).
CONVERSATION_SCHEMA_URL = "https://raw.githubusercontent.com/promptls/promptls/main/assembly/data/conversation.schema.json"
SCHEMA_FILE = "data/conversation.schema.json"  # inside the `assembly` package
REGENERATE_COMMAND = "python -m server.schema > assembly/data/conversation.schema.json"

Schema = dict[str, Any]

_ROLE_DOCS: dict[str, str] = {
    Role.SYSTEM: "The system prompt (the first one is used when `system_prompt` is not set).",
    Role.USER: "A user turn; may carry uploaded `files` or be an injected file (`file_id`).",
    Role.ASSISTANT: "A model answer; may call tools (`tool_calls`).",
    Role.TOOL: "A tool result, answering the tool call named by `tool_call_id`.",
    Role.REMINDER: "The reminder text: always sent as the very last message.",
    Role.SUMMARY: "A summary that replaces the messages up to `summarizes_through`.",
    "developer": "OpenAI's system role of o-series and GPT-5 requests: read as `system`.",
}
_FILE_TYPES = ["text", "tabular", "image", "document"]


def schema_path() -> Path:
    """Return the path of the installed ``conversation.schema.json``."""
    return Path(str(resources.files("assembly").joinpath(SCHEMA_FILE)))


def conversation_schema() -> Schema:
    """Return the JSON Schema (draft 2020-12) of a conversation document."""
    settings = SettingsModel.model_json_schema()
    settings_defs = settings.pop("$defs", {})
    settings["title"] = "promptls settings"
    settings["description"] = (
        "Settings for this document; they override `[tool.promptls]` in pyproject.toml or "
        "promptls.toml and the editor's settings. An invalid value is reported "
        "(`invalid-setting`) and the value from those sources stays in force."
    )
    defs: Schema = {
        "message_list": {
            "type": "array",
            "description": "The conversation's messages, in order (OpenAI chat format).",
            "items": {"$ref": "#/$defs/message"},
        },
        "document": _document(),
        "settings": settings,
        "message": _message(),
        "content_part": _content_part(),
        "tool_call": _tool_call(),
        "tool": _tool(),
        "project_file": _file(what="project file", allow_path=True),
        "uploaded_file": _file(what="uploaded file", allow_path=False),
        "text_block": _text_block(),
        "token_count": {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}],
            "description": "A stored token count used instead of counting the text "
            "(Onyx stores counts; fixtures pin exact budgets with it).",
        },
        "message_ref": {
            "anyOf": [{"type": "string"}, {"type": "integer"}],
            "description": "A message `id` (its index when the message has no `id`).",
        },
    }
    for name, value in settings_defs.items():
        assert name not in defs, f"settings definition {name} clashes with ours"
        defs[name] = value
    defs.update(format_defs(defs["document"]["properties"]))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": CONVERSATION_SCHEMA_URL,
        "title": "promptls conversation",
        "description": "An LLM conversation for promptls (*.conv.json, *.conv.yaml; a "
        "*.conv.jsonl file holds the same messages one per line): a bare array of "
        "messages, or an object with `messages` and the context around them; an Anthropic "
        "Messages request or OpenAI Responses input is read too.",
        "anyOf": [
            {"$ref": "#/$defs/message_list"},
            {"$ref": "#/$defs/document"},
            *FORMAT_ROOTS,
        ],
        "$defs": defs,
    }


def render_schema() -> str:
    """Return the schema file's text."""
    return jsonout.dumps(conversation_schema()) + "\n"


# ---------------------------------------------------------------- document


def _document() -> Schema:
    return {
        "type": "object",
        "description": "A conversation with its context: settings, system prompt, custom "
        "agent prompt, project files, tools, reminder and messages.",
        "properties": {
            "$schema": {
                "type": "string",
                "description": "The JSON Schema of this document, for editors: "
                f"{CONVERSATION_SCHEMA_URL}. promptls ignores it.",
            },
            "settings": {"$ref": "#/$defs/settings"},
            "system_prompt": {
                "description": "The system prompt: a path to a *.prompt.md template "
                "(relative to this document, inside the workspace), `{path: …}`, the text "
                "itself, or `{content, token_count}`. Default: the first `system` message.",
                "anyOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {
                            "path": {
                                "type": "string",
                                "description": "A *.prompt.md template, relative to this document.",
                            }
                        },
                        "required": ["path"],
                        "additionalProperties": False,
                    },
                    {"$ref": "#/$defs/text_block"},
                    {"type": "null"},
                ],
            },
            "custom_agent_prompt": {
                "description": "Text sent as a user message before the project files; it "
                "becomes the system prompt when `settings.replace_system_prompt` is true, and "
                "also when the document has no system prompt (Onyx's empty-base-prompt "
                "branch: the custom agent prompt is then the system message).",
                "anyOf": [{"type": "string"}, {"$ref": "#/$defs/text_block"}, {"type": "null"}],
            },
            "project_files": {
                "type": "array",
                "description": "Files that follow the conversation's tail every turn (inlined, "
                "or listed for `read_file` once they are too large).",
                "items": {"$ref": "#/$defs/project_file"},
            },
            "tools": {
                "type": ["array", "null"],
                "description": "The tools offered this turn (OpenAI tool schemas, or bare "
                "names; null: none); tool guidance for tools not offered is left out of the "
                "system prompt.",
                "items": {"$ref": "#/$defs/tool"},
            },
            "reminder": {
                "description": "The reminder text, always sent as the very last message.",
                "anyOf": [{"type": "string"}, {"$ref": "#/$defs/text_block"}, {"type": "null"}],
            },
            "additional_context": {
                "description": "Extra context for this turn (Onyx's `additional_context`, "
                "e.g. a Slack thread): sent as a user message right before the last user "
                "message, after its uploaded files.",
                "anyOf": [{"type": "string"}, {"$ref": "#/$defs/text_block"}, {"type": "null"}],
            },
            "user_info": _user_info(),
            "messages": {
                "$ref": "#/$defs/message_list",
                "description": "The conversation's messages, in order (OpenAI chat format, "
                "plus promptls' `id`, `parent`, `files`, `token_count`, … fields).",
            },
            **_request_body_keys(),
        },
        "required": ["messages"],
        "additionalProperties": False,
    }


def _request_body_keys() -> Schema:
    """A chat-completions request body is a conversation: its other fields are accepted."""
    res: Schema = {}
    for key in sorted(REQUEST_BODY_KEYS):
        if key == "model":
            res[key] = {
                "type": "string",
                "minLength": 1,
                "description": "The request's model: the document's `model` setting unless "
                "`settings.model` is given.",
            }
        elif key == "functions":
            res[key] = {
                "type": ["array", "null"],
                "description": "The legacy tool list; read as `tools` (null: none).",
                "items": {"$ref": "#/$defs/tool"},
            }
        else:
            res[key] = {"description": "A chat-completions request field; accepted, not read."}
    return res


def _text_block() -> Schema:
    return {
        "type": "object",
        "description": "A text with an optional stored token count.",
        "properties": {
            "content": {"type": "string", "description": "The text."},
            "token_count": {"$ref": "#/$defs/token_count"},
        },
        "required": ["content"],
        "additionalProperties": False,
    }


def _user_info() -> Schema:
    def text(doc: str) -> Schema:
        return {"type": ["string", "null"], "description": doc}

    return {
        "type": "object",
        "description": "Facts about the user: the `# User Information` section of the system "
        "prompt, and the values of `{{user.<key>}}` placeholders (any key).",
        "properties": {
            "name": text("The user's name."),
            "email": text("The user's email address."),
            "role": text("The user's role or job title."),
            "organization": {
                "type": "object",
                "description": "The organization profile: each key becomes a line.",
            },
            "team": text("The user's team."),
            "preferences": text("The user's preferences, as written by the user."),
            "memories": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Facts remembered about the user, one per item.",
            },
        },
    }


def _file(*, what: str, allow_path: bool) -> Schema:
    props: Schema = {
        "file_id": {
            "type": ["string", "integer"],
            "description": "The file's id (a UUID in Onyx): what `read_file` asks for.",
        },
        "filename": {
            "type": ["string", "integer", "null"],
            "description": "The file's name, shown to the model.",
        },
        "content": {"type": ["string", "null"], "description": "The file's text."},
    }
    if allow_path:
        props["path"] = {
            "type": "string",
            "description": "Read the text from this file (relative to this document, inside "
            "the workspace) instead of `content`.",
        }
    file_type = {
        "enum": _FILE_TYPES,
        "description": "`text` (default; `document` is the same), `tabular` (listed, never "
        "inlined) or `image`.",
    }
    props["type"] = file_type
    props["kind"] = {**file_type, "description": "Another name for `type`."}
    props["token_count"] = {"$ref": "#/$defs/token_count"}
    props["approx_char_count"] = {
        "type": "integer",
        "minimum": 0,
        "description": "The file's size in characters, as listed for `read_file`.",
    }
    if not allow_path:
        props["processing"] = {
            "type": ["boolean", "null"],
            "description": "The file is still being processed (Onyx's PROCESSING or "
            "INDEXING status): with no `content` the model is told so instead of that no "
            "text could be extracted.",
        }
    res: Schema = {
        "type": "object",
        "description": f"A {what}: `file_id`, `filename` and its `content`"
        + (" or `path`." if allow_path else "."),
        "properties": props,
        "required": ["file_id"],
        "additionalProperties": False,
    }
    if allow_path:
        both = {"required": ["content", "path"], "properties": {"content": {"type": "string"}}}
        res["allOf"] = [
            {"not": both, "errorMessage": "a file has both `content` and `path`: use one"}
        ]
    return res


def _tool() -> Schema:
    function = {
        "type": "object",
        "description": "The function the model may call.",
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "The tool's name."},
            "description": {
                "type": "string",
                "description": "What the tool does, for the model.",
            },
            "parameters": {
                "type": "object",
                "description": "The JSON Schema of the tool's arguments.",
            },
            "strict": {"type": "boolean", "description": "OpenAI strict mode."},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    flat_props = {
        "type": {"const": "function", "description": "Always `function`."},
        **function["properties"],
        "function": {"not": {}, "description": "Not in the flat form."},
    }
    return {
        "description": "A tool offered this turn, counted as `json.dumps` of its schema.",
        "anyOf": [
            {"type": "string", "minLength": 1, "description": "A bare tool name."},
            {
                "type": "object",
                "description": "An OpenAI chat-completions tool schema.",
                "properties": {
                    "type": {"const": "function", "description": "Always `function`."},
                    "function": function,
                },
                "required": ["function"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "description": "A flat tool schema (OpenAI Responses API).",
                "properties": flat_props,
                "required": ["name"],
                "additionalProperties": False,
            },
        ],
    }


# ---------------------------------------------------------------- messages


def _message() -> Schema:
    roles = [r.value for r in Role] + [a for a, r in ROLE_ALIASES.items() if r is Role.SYSTEM]
    not_allowed = {"not": {}}
    return {
        "type": "object",
        "description": "A message: OpenAI chat fields plus promptls' tree, file and count fields.",
        "properties": {
            "role": {
                "enum": roles,
                "description": "Who speaks: " + ", ".join(f"`{r}`" for r in roles) + ".",
                "enumDescriptions": [_ROLE_DOCS[r] for r in roles],
            },
            "content": {
                "description": "The text: a string, null (an assistant message that only calls "
                "tools), or an array of content parts (text and images).",
                "anyOf": [
                    {"type": "string"},
                    {"type": "null"},
                    {"type": "array", "items": {"$ref": "#/$defs/content_part"}},
                ],
            },
            "tool_calls": {
                "description": "On an assistant message: the tools it calls. Each call needs "
                "an answer: a `tool` message with the same `tool_call_id`.",
                "anyOf": [
                    {"type": "array", "items": {"$ref": "#/$defs/tool_call"}},
                    {"type": "null"},
                ],
            },
            "tool_call_id": {
                "type": ["string", "null"],
                "description": "On a `tool` message: the `id` of the tool call it answers.",
            },
            "name": {
                "type": ["string", "integer", "null"],
                "description": "OpenAI's optional name of the participant or tool.",
            },
            "id": {
                "anyOf": [
                    {"type": "string", "minLength": 1, "pattern": "^[^$]"},
                    {"type": "integer"},
                ],
                "description": "This message's id, named by `parent`, `summarizes_through`, "
                "`settings.branch_tip` and promptls' output. Default: its index in the list. "
                "Ids starting with `$` are the pipeline's own (`$system`, `$reminder`, …).",
            },
            "parent": {
                "anyOf": [{"$ref": "#/$defs/message_ref"}, {"type": "null"}],
                "description": "The id of the message this one follows: messages form a tree, "
                "and the conversation is the chain that ends at `settings.branch_tip` "
                "(default: the last message). Without it, a message follows the one before.",
            },
            "file_id": {
                "type": ["string", "integer", "null"],
                "description": "On a user message: this message is an injected file with this "
                "id (listed for `read_file` when the message is dropped).",
            },
            "filename": {
                "type": ["string", "integer", "null"],
                "description": "The injected file's name (with `file_id`).",
            },
            "files": {
                "type": "array",
                "description": "On a user message: files uploaded with it; each is sent as its "
                "own user message right before it.",
                "items": {"$ref": "#/$defs/uploaded_file"},
            },
            "token_count": {"$ref": "#/$defs/token_count"},
            "summarizes_through": {
                "$ref": "#/$defs/message_ref",
                "description": "On a `summary` message: the id of the last message it "
                "replaces; the messages up to it are not sent.",
            },
            "promptls-ignore": {
                "description": "Rule codes (or `all`) whose findings on this message are "
                "suppressed.",
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            },
            "function_call": {
                "type": "null",
                "description": "OpenAI's deprecated function call: read as a tool call with a "
                "made-up id (reported as information), so only null is plain.",
            },
            "images": {
                "type": ["array", "null"],
                "items": {"type": "string", "minLength": 1},
                "description": "Ollama's images (`/api/chat`): base64 images sent with the "
                "message, read as image parts.",
            },
            "tool_call_ids": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": 1,
                "description": "SWE-agent's spelling of `tool_call_id`: a list of one id.",
            },
            **{
                key: {
                    "description": "A log field (response, reasoning trace, fine-tuning "
                    "weight); accepted and not sent."
                }
                for key in sorted(LOG_MESSAGE_KEYS)
            },
        },
        "required": ["role"],
        "additionalProperties": False,
        "allOf": [
            {
                "if": _role_is("tool"),
                "then": {
                    "anyOf": [{"required": ["tool_call_id"]}, {"required": ["tool_call_ids"]}]
                },
            },
            {
                "if": _role_is("summary"),
                "then": {
                    "required": ["summarizes_through"],
                    "errorMessage": "a summary needs `summarizes_through`: "
                    "the id of the last summarized message",
                },
                "else": {
                    "properties": {
                        "summarizes_through": {
                            **not_allowed,
                            "errorMessage": "`summarizes_through` belongs on a message with "
                            "role `summary`",
                        }
                    }
                },
            },
            {
                "if": _role_is("user"),
                "else": {
                    "properties": {
                        "files": {
                            **not_allowed,
                            "errorMessage": "only user messages carry uploaded `files`",
                        },
                        "file_id": {
                            "type": "null",
                            "errorMessage": "only user messages can be injected files (`file_id`)",
                        },
                    }
                },
            },
            {
                "if": _role_is("assistant"),
                "else": {
                    "properties": {
                        "tool_calls": {
                            "type": "null",
                            "errorMessage": "only assistant messages make `tool_calls`",
                        }
                    }
                },
            },
        ],
    }


def _role_is(role: str) -> Schema:
    return {"properties": {"role": {"const": role}}, "required": ["role"]}


def _content_part() -> Schema:
    token_count = {"$ref": "#/$defs/token_count"}
    return {
        "description": "A content part: text or an image (a bare string is text).",
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "description": "A text part.",
                "properties": {
                    "type": {"const": "text", "description": "`text`."},
                    "text": {"type": "string", "description": "The text."},
                },
                "required": ["type", "text"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "description": "An image part: `image_url` (a URL or a data: URL) or a `file_id`.",
                "properties": {
                    "type": {
                        "enum": ["image_url", "image", "input_image"],
                        "description": "`image_url` (OpenAI chat), `image` or `input_image`.",
                    },
                    "image_url": {
                        "description": "The image: a URL, or `{url, detail}`.",
                        "anyOf": [
                            {"type": "string"},
                            {
                                "type": "object",
                                "properties": {
                                    "url": {
                                        "type": "string",
                                        "description": "An https: or data: URL.",
                                    },
                                    "detail": {
                                        "enum": ["auto", "low", "high"],
                                        "description": "OpenAI's image detail level.",
                                    },
                                },
                                "required": ["url"],
                                "additionalProperties": False,
                            },
                        ],
                    },
                    "file_id": {"type": "string", "description": "An uploaded image's id."},
                    "detail": {
                        "enum": ["auto", "low", "high"],
                        "description": "OpenAI's image detail level (`input_image`).",
                    },
                    "token_count": token_count,
                },
                "required": ["type"],
                "anyOf": [{"required": ["image_url"]}, {"required": ["file_id"]}],
                "additionalProperties": False,
            },
        ],
    }


def _tool_call() -> Schema:
    return {
        "type": "object",
        "description": "A tool call (OpenAI format).",
        "properties": {
            "id": {
                "type": "string",
                "minLength": 1,
                "description": "The call's id; the `tool` message that answers it repeats it "
                "as `tool_call_id`.",
            },
            "type": {"const": "function", "description": "Always `function`."},
            "index": {
                "type": "integer",
                "description": "The call's position, as streamed responses and Mistral write "
                "it; accepted and not sent.",
            },
            "function": {
                "type": "object",
                "description": "The tool called and its arguments.",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name."},
                    "arguments": {
                        "description": "The arguments: a JSON object encoded as a string (as "
                        "OpenAI sends them), or the object itself.",
                        "anyOf": [
                            {
                                "type": "string",
                                "pattern": r"^\s*(\{[\s\S]*\}\s*)?$",
                                "patternErrorMessage": "`arguments` must be a JSON object "
                                "encoded as a string",
                                "contentMediaType": "application/json",
                                "contentSchema": {"type": "object"},
                            },
                            {"type": "object"},
                            {"type": "null"},
                        ],
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            "token_count": {"$ref": "#/$defs/token_count"},
        },
        "required": ["id", "function"],
        "additionalProperties": False,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--path"]:
        print(schema_path())
        return 0
    if args:
        print("usage: python -m server.schema [--path]", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(render_schema().encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
