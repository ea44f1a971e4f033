"""The JSON Schema definitions of the other formats promptls reads by their shape.

``server/schema.py`` adds them to the conversation schema as alternatives, so that an
editor validating a ``*.conv.json`` that holds an Anthropic Messages request or OpenAI
Responses input sees what promptls reads (``assembly/formats``), never more.
"""

from __future__ import annotations

from typing import Any

from assembly.formats.anthropic import REQUEST_KEYS as ANTHROPIC_KEYS
from assembly.formats.detect import ANTHROPIC_BLOCKS, RESPONSES_ITEMS, RESPONSES_PARTS
from assembly.formats.responses import REQUEST_KEYS as RESPONSES_KEYS

Schema = dict[str, Any]
_MORE_PARTS = {"input_audio", "text", "summary_text"}  # read too (``formats.responses``)
_PROMPTLS = ("settings", "custom_agent_prompt", "project_files", "reminder", "user_info")
_ANTHROPIC_BLOCK_TYPES = sorted(
    {"text", "image", "tool_addition", "advisor_tool_result", "tool_search_tool_result"}
    | ANTHROPIC_BLOCKS
)


def _documented(key: str, fmt: str) -> Schema:
    return {"description": f"A request field of the {fmt} API (accepted as it is)."}


def format_defs(promptls_props: Schema) -> Schema:
    """The ``$defs`` of the Anthropic and Responses documents (``promptls_props``: the
    properties of promptls' own document, whose keys both accept too)."""
    anthropic_props: Schema = {
        k: _documented(k, "Anthropic Messages") for k in sorted(ANTHROPIC_KEYS)
    }
    anthropic_props.update(
        {
            "$schema": {"type": "string", "description": "This schema; promptls ignores it."},
            "model": {"type": "string", "description": "The model (sets the `model` setting)."},
            "system": {
                "description": "The system prompt: a string or text blocks.",
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"$ref": "#/$defs/anthropic_block"}},
                    {"type": "null"},
                ],
            },
            "tools": {
                "type": "array",
                "description": "Tool definitions (`name`, `description`, `input_schema`).",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "description": "Tool name."}
                    },
                },
            },
            "messages": {
                "type": "array",
                "description": "The `user` and `assistant` turns, in order.",
                "items": {"$ref": "#/$defs/anthropic_message"},
            },
        }
    )
    for key in _PROMPTLS:
        anthropic_props[key] = promptls_props[key]
    responses_props: Schema = {
        k: _documented(k, "OpenAI Responses") for k in sorted(RESPONSES_KEYS)
    }
    responses_props.update(
        {
            "$schema": {"type": "string", "description": "This schema; promptls ignores it."},
            "model": {"type": "string", "description": "The model (sets the `model` setting)."},
            "instructions": {
                "description": "The system prompt.",
                "anyOf": [{"type": "string"}, {"type": "null"}],
            },
            "input": {
                "description": "The input: a string (one user message) or input items.",
                "anyOf": [{"type": "string"}, {"$ref": "#/$defs/responses_items"}],
            },
        }
    )
    for key in _PROMPTLS:
        responses_props[key] = promptls_props[key]
    return {
        "anthropic_request": {
            "type": "object",
            "description": "An Anthropic Messages request body (or log of one).",
            "required": ["messages"],
            "properties": anthropic_props,
            "additionalProperties": False,
        },
        "anthropic_messages": {
            "type": "array",
            "description": "The `messages` of an Anthropic Messages request, on their own.",
            "items": {"$ref": "#/$defs/anthropic_message"},
        },
        "anthropic_message": {
            "type": "object",
            "description": "A `user` or `assistant` turn of content blocks.",
            "required": ["role", "content"],
            "properties": {
                "role": {"enum": ["user", "assistant"], "description": "Who speaks."},
                "content": {
                    "description": "A string, or content blocks.",
                    "anyOf": [
                        {"type": "string"},
                        {"type": "array", "items": {"$ref": "#/$defs/anthropic_block"}},
                    ],
                },
                "id": {"$ref": "#/$defs/message_ref", "description": "The message's id."},
                "token_count": {"$ref": "#/$defs/token_count"},
                "promptls-ignore": {
                    "description": "Rule codes to suppress on this message.",
                    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                },
            },
            "additionalProperties": False,
        },
        "anthropic_block": {
            "type": "object",
            "description": "A content block (`text`, `image`, `document`, `tool_use`, "
            "`tool_result`, `thinking`…).",
            "required": ["type"],
            "properties": {
                "type": {"enum": _ANTHROPIC_BLOCK_TYPES, "description": "The block's kind."}
            },
        },
        "responses_request": {
            "type": "object",
            "description": "An OpenAI Responses API request body (or log of one).",
            "required": ["input"],
            "properties": responses_props,
            "additionalProperties": False,
        },
        "responses_items": {
            "type": "array",
            "description": "OpenAI Responses input items, in order.",
            "items": {
                "anyOf": [
                    {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {
                                "enum": sorted(RESPONSES_ITEMS - {"message"}),
                                "description": "The item's kind.",
                            }
                        },
                    },
                    {
                        "type": "object",
                        "required": ["role", "content"],
                        "properties": {
                            "type": {"const": "message", "description": "A message item."},
                            "role": {
                                "enum": ["user", "assistant", "system", "developer"],
                                "description": "Who speaks.",
                            },
                            "content": {
                                "description": "A string or content parts.",
                                "anyOf": [
                                    {"type": "string"},
                                    {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["type"],
                                            "properties": {
                                                "type": {
                                                    "enum": sorted(RESPONSES_PARTS | _MORE_PARTS),
                                                    "description": "The part's kind.",
                                                }
                                            },
                                        },
                                    },
                                ],
                            },
                            "id": {"type": "string", "description": "The provider's item id."},
                            "status": {"type": "string", "description": "The item's status."},
                        },
                        "additionalProperties": False,
                    },
                ]
            },
        },
    }


# The root alternatives, after promptls' own two.
FORMAT_ROOTS = (
    {"$ref": "#/$defs/anthropic_request"},
    {"$ref": "#/$defs/anthropic_messages"},
    {"$ref": "#/$defs/responses_request"},
    {"$ref": "#/$defs/responses_items"},
)
