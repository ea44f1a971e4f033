"""Output formats and thresholds of `promptls lint`, importable without the engine."""

from __future__ import annotations

FORMATS = ("text", "json", "sarif", "github", "gitlab")
FAIL_ON = ("error", "warning", "info")
