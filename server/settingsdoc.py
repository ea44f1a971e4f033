"""The settings reference, ``docs/settings.md``, generated from the pydantic model.

Every key, type, default, bound and description comes from ``assembly.settings_table.Settings``
at run time, so the reference cannot drift from what promptls accepts: regenerate it with
``python -m server.settingsdoc > docs/settings.md``; ``tests/test_docs.py`` fails when it
is not current.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from assembly.settings_model import SettingsModel

REGENERATE_COMMAND = "python -m server.settingsdoc > docs/settings.md"

_INTRO = """\
Settings decide the window, the encoding, the provider format and the rules' thresholds.
They come from these sources; a later one wins, key by key:

1. the built-in defaults (Onyx's);
2. the nearest settings file at or above the document's folder, up to the workspace root: a
   `promptls.toml`, or a `pyproject.toml` that has `[tool.promptls]` (one without it is passed
   over; in one folder `promptls.toml` wins). Only that one file is read: files further up are
   not merged into it, as with ruff;
3. the editor's settings (the `promptls` section of `workspace/configuration` or of
   `initializationOptions`; in VS Code, `promptls.<key>`);
4. a prompt template's front matter `settings`;
5. the document's own `settings`;
6. command-line flags (`promptls assemble --provider`).

An invalid value is reported where it is written (`invalid-setting`, an unknown key is a
warning) and the value from the sources below it stays in force, so one typo never hides the
rest. A settings file that cannot be read at all (invalid TOML; a folder, a FIFO or a device
by that name) is an error at it: the editor then applies the next readable settings file above
it, as ruff's language server does, and `promptls lint` stops with exit code 2, as `ruff check`
does. The same keys, with the same meaning, are accepted everywhere:

```toml
# pyproject.toml (or promptls.toml without the [tool.promptls] line)
[tool.promptls]
model = "gpt-4o"
max_input_tokens = 200000
rules = { history-truncated = "off", reminder-not-last = "error" }
```

```yaml
# a conversation's own settings
settings: {max_input_tokens: 32000, encoding: cl100k_base}
messages: []
```

```json
{"promptls": {"max_input_tokens": 200000}}
```
(the editor's `initializationOptions` or `workspace/configuration` answer)."""


# What a one-line description cannot say: longer explanations, for the reference only.
_NOTES = {
    "model": 'Models named `gpt-5*`, `o1` or `o3` also get Onyx\'s "Formatting re-enabled. " '
    "prefix on the system prompt.",
    "encoding": "Unset, the model picks it: `o200k_base` for gpt-4o, gpt-4.1, the o-series and "
    "gpt-5, `cl100k_base` for gpt-4 and gpt-3.5; other providers' models (Claude, Gemini, "
    "Llama, Qwen, Mistral, DeepSeek) get the closest encoding, marked approximate. "
    "`cl100k_base`, `o200k_base` and `o200k_harmony` always work offline; a legacy encoding is "
    "used when tiktoken already has its file in its cache directory (`TIKTOKEN_CACHE_DIR`), "
    "otherwise promptls says so once and counts with `cl100k_base`. It never downloads "
    "anything. The model table and the approximations: [tokens.md](tokens.md).",
    "max_input_tokens": "The available input is ⌊max_input_tokens × (1 − safety_margin)⌋; "
    "the tool definitions offered this turn are charged first.",
    "reserved_tokens": "`auto` is the worst-case system prompt with all tool guidance, plus the "
    "custom agent prompt and this turn's uploads. It is what Onyx subtracts before deciding "
    "whether project files are inlined or listed for `read_file` (at 60 %).",
    "provider": "`ollama` flattens tool calls into `[Tool Call]` / `[Tool Result]` text; "
    "`azure` gets Azure's cap of 50 images per request when `image_cap` is `true`.",
    "image_cap": "Onyx caps images only with `ENABLE_AZURE_IMAGE_CAP` on, and only for Azure "
    "(`backend/onyx/configs/app_configs.py:1688`): `true` is that switch. The note that images "
    "were omitted is charged to the budget.",
    "prompt_cache_chat_history": "With it on, `cache_prefix_length` counts the leading "
    "messages Onyx marks `should_cache` (the system prompt and the kept earlier history); off "
    "(Onyx's default) there is no prefix, though the layout still shows the marks.",
    "prompt_cache_marker": "Onyx's Anthropic adapter puts `cache_control: {type: ephemeral}` on "
    "the prefix's last message; OpenAI's caching is implicit (no marker).",
    "last_n_user_messages": "Injected uploads are user-type messages too. What the filter "
    "removes is reported in `dropped`, and files no message carries any more are listed for "
    "`read_file`.",
    "replace_system_prompt": "A document with no system prompt at all sends its custom agent "
    "prompt as the system message anyway (Onyx's empty-base-prompt branch), with no "
    "custom-agent user message.",
    "branch_tip": "A numeric id, as Onyx stores message ids, is accepted.",
    "keep_past_tool_results": "By default earlier turns' tool results become Onyx's placeholder "
    "sentence (and are charged as such).",
    "vision": "With `false`, images are replaced by text markers and charged as such.",
    "last_cycle": "The last-cycle reminder is used and no tool is offered (0 tool tokens).",
    "rules": 'Example: `rules = { history-truncated = "off", reminder-not-last = "error" }`. '
    "The codes are those of [RULES.md](../RULES.md).",
    "include": "Globs are relative to the settings file that sets them.",
}


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "anyOf" in prop:
        return " \\| ".join(_type(p) for p in prop["anyOf"])
    t = prop.get("type", "any")
    if t == "array":
        return f"array of {_type(prop.get('items', {}))}"
    if t == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of string → {_type(prop['additionalProperties'])}"
    return str(t)


def _bounds(prop: dict[str, Any]) -> list[str]:
    out = []
    for p in prop.get("anyOf", [prop]):
        for key, op in (
            ("exclusiveMinimum", ">"),
            ("minimum", "≥"),
            ("exclusiveMaximum", "<"),
            ("maximum", "≤"),
        ):
            if key in p:
                out.append(f"{op} {p[key]}")
    return out


def _default(name: str, *, short: bool = False) -> str:
    field = SettingsModel.model_fields[name]
    value = json.dumps(field.get_default(call_default_factory=True), ensure_ascii=False)
    if short and len(value) > 40:
        return f"see [`{name}`](#{name})"
    return f"`{value}`"


def render_settings_md() -> str:
    """Render ``docs/settings.md``."""
    props = SettingsModel.model_json_schema()["properties"]
    lines = [
        "# Settings",
        "",
        "<!-- Generated from assembly/settings_table.py by "
        f"`{REGENERATE_COMMAND}`; do not edit. -->",
        "",
        _INTRO,
        "",
        "## Summary",
        "",
        "| key | type | default | |",
        "|---|---|---|---|",
    ]
    for name, prop in props.items():
        desc = prop.get("description", "").replace("|", "\\|")
        default = _default(name, short=True)
        lines.append(f"| [`{name}`](#{name}) | {_type(prop)} | {default} | {desc} |")
    for name, prop in props.items():
        lines += ["", f"## {name}", ""]
        lines.append(prop.get("description", ""))
        if name in _NOTES:
            lines += ["", _NOTES[name]]
        lines.append("")
        lines.append(f"- type: {_type(prop)}")
        bounds = _bounds(prop)
        if bounds:
            lines.append(f"- allowed: {', '.join(bounds)}")
        lines.append(f"- default: {_default(name)}")
        lines.append(f"- editor setting: `promptls.{name}`")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_settings_md())
