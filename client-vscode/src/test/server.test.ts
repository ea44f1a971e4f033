// Against the real server (the repo's venv, skipped without it): the initializationOptions
// shape is the one the server reads, and `promptls.assemble` answers what the status bar and
// the assembled view render.
import "./vscodeStub";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { StreamMessageReader, StreamMessageWriter, createMessageConnection } from "vscode-jsonrpc/node";
import { renderAssembled } from "../assembledView";
import { ASSEMBLE_COMMAND, type Assembled } from "../lspExt";
import { initializationOptions, resolveServerCommand } from "../settings";
import { statusOf } from "../statusBar";

const repo = resolve(__dirname, "..", "..", "..");
const python = process.env.PROMPTLS_PYTHON ?? join(repo, ".venv", "bin", "python");

// Skipped without the venv, except with CI=true, where that is a failure (as the e2e tests do).
const skip = !existsSync(python) && process.env.CI !== "true" ? `no ${python} (set PROMPTLS_PYTHON)` : false;

test("server: initializationOptions and promptls.assemble", { skip, timeout: 60_000 }, async () => {
  assert.ok(existsSync(python), `no ${python}: create the venv first, or set PROMPTLS_PYTHON`);
  const cmd = resolveServerCommand({ interpreter: python });
  const proc = spawn(cmd.command, cmd.args, { cwd: repo, stdio: ["pipe", "pipe", "inherit"] });
  const conn = createMessageConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
  const settings = { safety_margin: 0.1 };
  conn.onRequest("workspace/configuration", (params: { items: Array<{ section?: string }> }) =>
    params.items.map((i) => (i.section === "promptls" ? settings : null)),
  );
  conn.onRequest(() => null);
  conn.onNotification(() => undefined);
  conn.listen();
  try {
    const root = pathToFileURL(repo).href;
    await conn.sendRequest("initialize", {
      processId: process.pid,
      rootUri: root,
      workspaceFolders: [{ uri: root, name: "promptls" }],
      capabilities: {}, // no workspace/configuration: the settings come from initializationOptions alone
      initializationOptions: initializationOptions(settings),
    });
    await conn.sendNotification("initialized", {});
    const path = join(repo, "examples", "overflow.conv.yaml");
    const uri = pathToFileURL(path).href;
    const a = (await conn.sendRequest("workspace/executeCommand", { command: ASSEMBLE_COMMAND, arguments: [uri] })) as Assembled;
    assert.equal(a.segments.length, 8);
    assert.ok(a.budget.available_tokens > 0);
    const s = statusOf(a);
    assert.match(s.text, /^\$\(symbol-numeric\) \S+ \/ \S+ tokens$/);
    assert.equal(s.level, a.compression?.triggered ? "warning" : "normal");
    const md = renderAssembled(a);
    assert.equal((md.match(/^## \d\. /gm) ?? []).length, 8);

    const agent = pathToFileURL(join(repo, "examples", "support-agent.conv.json")).href;
    const b = (await conn.sendRequest("workspace/executeCommand", { command: ASSEMBLE_COMMAND, arguments: [agent] })) as Assembled;
    assert.equal(b.budget.safety_margin, 0.1, "editor settings reach the server");
    assert.equal(b.budget.available_tokens, 115200);
    await conn.sendRequest("shutdown");
    await conn.sendNotification("exit");
  } finally {
    conn.dispose();
    proc.kill();
  }
});
