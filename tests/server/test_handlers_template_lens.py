"""The template code lens and ``promptls.templateDiff``, in-process on a real server.

The workspace is the throwaway review repository of ``tests.support.gitrepo`` (a template
that feeds two conversations): the lens says how many conversations read the template and
what its uncommitted change costs them against HEAD (``server.cli.diff.template_use``, the
``promptls diff`` implementation), the command returns that diff as Markdown, the answer is
cached per template version, and outside git the lens only counts the conversations.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

import server.cli.diff as diff_module
from server.cli.main import main
from tests.support.gitrepo import TEMPLATE_EDIT, build_review_repo, edit, git
from tests.support.inprocess import InProcessClient

TEMPLATE = "prompts/support-agent.prompt.md"


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("lens") / "repo"
    build_review_repo(repo)
    git(repo, "checkout", "-q", "main")  # HEAD: the template before the change
    return repo


@pytest.fixture
def repo(origin: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(origin, dest, symlinks=True)
    return dest


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Count the computations (the cache must spare the repeated ones; the lens imports
    ``template_use`` when it first runs it)."""
    seen: list[Path] = []
    real = diff_module.template_use

    def counting(path: Path, **kw: Any) -> Any:
        seen.append(path)
        return real(path, **kw)

    monkeypatch.setattr(diff_module, "template_use", counting)
    return seen


async def _client(root: Path) -> InProcessClient:
    c = InProcessClient()
    await c.initialize(lsp.ClientCapabilities(), root_uri=root.as_uri())
    return c


@pytest.fixture
async def client(repo: Path) -> AsyncIterator[InProcessClient]:
    c = await _client(repo)
    yield c
    c.shutdown()


async def _lenses(c: InProcessClient, uri: str) -> list[lsp.CodeLens]:
    params = lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    return list(await c.request(lsp.TEXT_DOCUMENT_CODE_LENS, params, list[lsp.CodeLens]) or [])


async def _run(c: InProcessClient, command: str, uri: str) -> dict[str, Any]:
    params = lsp.ExecuteCommandParams(command=command, arguments=[uri])
    return await c.request(lsp.WORKSPACE_EXECUTE_COMMAND, params)  # type: ignore[no-any-return]


async def _open_template(c: InProcessClient, path: Path) -> str:
    uri = path.as_uri()
    await c.open(uri, path.read_text(encoding="utf-8"), language_id="markdown")
    return uri


async def test_lens_counts_the_conversations_and_the_delta_against_head(
    client: InProcessClient,
    repo: Path,
    calls: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = repo / TEMPLATE
    uri = await _open_template(client, path)
    [lens] = await _lenses(client, uri)
    assert lens.range == lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    assert lens.command == lsp.Command(
        title="used by 2 conversations · ±0 tokens vs HEAD",
        command="promptls.showTemplateDiff",
        arguments=(uri,),
    )
    # The change is saved: the lens of the new version shows what it costs.
    edit(path, *TEMPLATE_EDIT)
    client.change(uri, 2, path.read_text(encoding="utf-8"))
    await client.analysed(uri, 2)
    [lens] = await _lenses(client, uri)
    assert lens.command is not None
    assert lens.command.title == "used by 2 conversations · +86 tokens vs HEAD"
    assert len(calls) == 2
    # Clicking it: the same answer as promptls.templateDiff, from the cache.
    shown = await _run(client, lens.command.command, uri)
    asked = await _run(client, "promptls.templateDiff", uri)
    assert shown == asked
    assert len(calls) == 2
    assert asked["template"] == TEMPLATE
    assert asked["conversations"] == ["branching.conv.yaml", "support-agent.conv.yaml"]
    assert asked["delta"] == 86
    md = asked["markdown"]
    assert md.startswith("### promptls diff: HEAD (")
    assert "→ work tree: 2 conversations changed, 0 unchanged" in md
    assert "| `support-agent.conv.yaml` (changed) |" in md and "(+43)" in md
    assert "{{QUEUE_NAME}}" in md  # the finding that appeared: an unknown placeholder
    # The one implementation: what `promptls diff HEAD -- TEMPLATE` prints.
    monkeypatch.chdir(repo)
    assert main(["diff", "--format", "markdown", "HEAD", "--", TEMPLATE]) == 0
    assert capsys.readouterr().out == md


async def test_typing_in_the_template_computes_nothing_until_it_is_saved(
    client: InProcessClient, repo: Path, calls: list[Path]
) -> None:
    # The lens reads the files as saved: each keystroke is a version in the editor, and
    # each would analyse every conversation of the workspace again for the same answer.
    path = repo / TEMPLATE
    uri = await _open_template(client, path)
    [lens] = await _lenses(client, uri)
    text = path.read_text(encoding="utf-8")
    for version, typed in enumerate(("Q", "Qu", "Que"), 2):
        client.change(uri, version, text + typed)
        await client.analysed(uri, version)
        assert await _lenses(client, uri) == [lens]
    assert len(calls) == 1
    edit(path, *TEMPLATE_EDIT)  # saved: a new version on disk
    [saved] = await _lenses(client, uri)
    assert saved.command is not None
    assert saved.command.title == "used by 2 conversations · +86 tokens vs HEAD"
    assert len(calls) == 2


async def test_template_no_conversation_reads_has_no_lens(
    client: InProcessClient, repo: Path
) -> None:
    path = repo / "prompts" / "unused.prompt.md"
    path.write_text("You are a helpful agent.\n", encoding="utf-8")
    uri = await _open_template(client, path)
    assert await _lenses(client, uri) == []
    answer = await _run(client, "promptls.templateDiff", uri)
    assert answer["conversations"] == [] and answer["delta"] == 0


async def test_without_git_the_lens_only_counts(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
    c = await _client(plain)
    try:
        uri = await _open_template(c, plain / TEMPLATE)
        [lens] = await _lenses(c, uri)
        assert lens.command is not None
        assert lens.command.title == "used by 2 conversations"
        answer = await _run(c, "promptls.templateDiff", uri)
    finally:
        c.shutdown()
    assert answer["delta"] is None
    assert answer["markdown"] == (
        f"`{TEMPLATE}` is used by 2 conversations (not in a git repository: nothing to "
        "compare with).\n\n- `branching.conv.yaml`\n- `support-agent.conv.yaml`\n"
    )


async def test_the_command_refuses_what_is_not_a_template(
    client: InProcessClient, repo: Path
) -> None:
    params = lsp.ExecuteCommandParams(
        command="promptls.templateDiff", arguments=[(repo / "overflow.conv.yaml").as_uri()]
    )
    with pytest.raises(Exception, match="not a template"):
        await client.request(lsp.WORKSPACE_EXECUTE_COMMAND, params)


async def test_a_template_outside_the_workspace_folders_has_no_lens(
    repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    c = await _client(elsewhere)
    try:
        uri = await _open_template(c, repo / TEMPLATE)
        assert await _lenses(c, uri) == []
        params = lsp.ExecuteCommandParams(command="promptls.templateDiff", arguments=[uri])
        with pytest.raises(Exception, match="not inside a workspace folder"):
            await c.request(lsp.WORKSPACE_EXECUTE_COMMAND, params)
    finally:
        c.shutdown()
