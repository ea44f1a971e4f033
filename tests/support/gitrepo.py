"""A throwaway git repository with a template and the conversations it feeds, in two commits.

``build_review_repo(dest)`` copies the bundled examples into ``dest`` with a
``promptls.toml`` that turns Onyx's prompt cache on (``prompt_cache_chat_history``), commits
them (``base``), then commits a change (``change``): the support-agent template gains an
escalation paragraph with an unknown placeholder (it feeds two conversations), and the
overflow conversation's window shrinks so that a message falls out of the budget. Commits
have fixed authors and dates, so their hashes (and the outputs that show them) are stable.
Used by the diff tests and the worked example in docs/diff.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = (
    "prompts/support-agent.prompt.md",
    "docs/sla-policy.md",
    "support-agent.conv.yaml",
    "branching.conv.yaml",
    "overflow.conv.yaml",
)
TEMPLATE_EDIT = (
    "Never promise a fix date",
    "Before you escalate a billing question, quote the customer's plan and the SLA section\n"
    "that applies, and name the queue ({{QUEUE_NAME}}) so the billing team does not have to\n"
    "look them up again.\n\nNever promise a fix date",
)
BUDGET_EDIT = ("max_input_tokens: 4096", "max_input_tokens: 3300")


def git(repo: Path, *args: str, when: str = "2026-07-01T12:00:00Z") -> str:
    """Run git in ``repo`` with a fixed identity and date (no user or system config)."""
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
    }
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def build_review_repo(dest: Path) -> tuple[str, str]:
    """Create the repository in ``dest``; return the ``base`` and ``change`` commits."""
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "main")
    for rel in FILES:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(EXAMPLES / rel, target)
    # A team that turns Onyx's prompt cache on (PROMPT_CACHE_CHAT_HISTORY).
    (dest / "promptls.toml").write_text("prompt_cache_chat_history = true\n", encoding="utf-8")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    base = git(dest, "rev-parse", "HEAD")
    git(dest, "checkout", "-q", "-b", "change")
    edit(dest / "prompts/support-agent.prompt.md", *TEMPLATE_EDIT)
    edit(dest / "overflow.conv.yaml", *BUDGET_EDIT)
    git(dest, "commit", "-q", "-am", "change", when="2026-07-02T12:00:00Z")
    return base, git(dest, "rev-parse", "HEAD")
