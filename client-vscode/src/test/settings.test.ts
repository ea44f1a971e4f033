import "./vscodeStub";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { SERVER_SETTING_KEYS, configurationAnswers, explicitSettings, initializationOptions, needsRestart, resolveServerCommand, startFailureMessage } from "../settings";

test("server command: path > interpreter > python extension > PATH", () => {
  const all = { path: "/opt/promptls", interpreter: "/venv/bin/python", pythonExtension: "/usr/bin/python3" };
  assert.deepEqual(resolveServerCommand(all), { command: "/opt/promptls", args: ["serve"], source: "promptls.server.path" });
  assert.deepEqual(resolveServerCommand({ ...all, path: "" }), {
    command: "/venv/bin/python",
    args: ["-m", "server"],
    source: "promptls.server.interpreter",
  });
  assert.deepEqual(resolveServerCommand({ ...all, path: " ", interpreter: "" }), {
    command: "/usr/bin/python3",
    args: ["-m", "server"],
    source: "python extension",
  });
  assert.deepEqual(resolveServerCommand({}), { command: "promptls", args: ["serve"], source: "PATH" });
});

test("server setting keys are package.json's, without the client-only ones", () => {
  assert.ok(SERVER_SETTING_KEYS.includes("model"));
  assert.ok(SERVER_SETTING_KEYS.includes("max_input_tokens"));
  assert.ok(SERVER_SETTING_KEYS.includes("safety_margin"));
  assert.ok(!SERVER_SETTING_KEYS.some((k) => k.startsWith("server.") || k.startsWith("trace.")));
});

test("only explicitly set values are sent, folder > workspace > user", () => {
  const values: Record<string, object> = {
    model: { globalValue: "gpt-4o-mini", workspaceValue: "gpt-4.1" },
    max_input_tokens: { globalValue: 32000, workspaceValue: 64000, workspaceFolderValue: 16000 },
    provider: { globalValue: "azure" },
    safety_margin: {}, // default only: left out
    "server.path": { globalValue: "/x" }, // client-only: never sent
  };
  const got = explicitSettings((k) => values[k]);
  assert.deepEqual(got, { model: "gpt-4.1", max_input_tokens: 16000, provider: "azure" });
});

test("initializationOptions shape: {promptls: {...}}", () => {
  assert.deepEqual(initializationOptions({ model: "gpt-4o" }), { promptls: { model: "gpt-4o" } });
  assert.deepEqual(initializationOptions({}), { promptls: {} });
});

test("changing promptls.server.* restarts; other settings resync", () => {
  assert.equal(needsRestart((s) => s === "promptls.server"), true);
  assert.equal(needsRestart(() => false), false);
});

test("start failure message names the command and the fix", () => {
  const msg = startFailureMessage(resolveServerCommand({}), new Error("spawn promptls ENOENT"));
  assert.match(msg, /`promptls serve`/);
  assert.match(msg, /Set promptls\.server\.interpreter/);
  assert.match(msg, /ENOENT/);
});

test("package.json has the client settings and one entry per server setting", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));
  const props = Object.keys(pkg.contributes.configuration.properties);
  for (const k of ["promptls.server.path", "promptls.server.interpreter", "promptls.trace.server"]) assert.ok(props.includes(k), k);
});

test("workspace/configuration: promptls answered from the settings, other sections passed through", () => {
  const got = configurationAnswers(
    [{ section: "promptls", scopeUri: "file:///w" }, { section: "files" }, { section: "promptls" }],
    [undefined, { exclude: {} }, undefined],
    (scope) => ({ scope: scope ?? null }),
  );
  assert.deepEqual(got, [{ scope: "file:///w" }, { exclude: {} }, { scope: null }]);
});
