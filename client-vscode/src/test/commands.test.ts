import { registered } from "./vscodeStub";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { registerCommands } from "../extension";
import { DOCUMENT_SELECTOR } from "../client";
import { COMMANDS } from "../lspExt";

const pkg = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));

test("registered command ids are exactly package.json contributes.commands", async () => {
  const calls: string[] = [];
  const disposables = registerCommands({
    showAssembledContext: async (uri) => void calls.push(`show ${String(uri)}`),
    exportAssembledMarkdown: async (uri) => void calls.push(`export ${String(uri)}`),
    restartServer: async () => void calls.push("restart"),
    lintWorkspace: async () => void calls.push("lint"),
  });
  const contributed = pkg.contributes.commands.map((c: { command: string }) => c.command).sort();
  assert.deepEqual([...registered.keys()].sort(), contributed);
  for (const c of pkg.contributes.commands) assert.equal(c.category, "promptls");
  await registered.get("promptls.showAssembledContext")!("file:///a.conv.json");
  await registered.get("promptls.exportAssembledMarkdown")!("file:///b.conv.json");
  await registered.get("promptls.restartServer")!();
  await registered.get("promptls.lintWorkspace")!();
  assert.deepEqual(calls, ["show file:///a.conv.json", "export file:///b.conv.json", "restart", "lint"]);
  for (const d of disposables) d.dispose();
  assert.equal(registered.size, 0);
});

test("client commands do not collide with the server's (vscode-languageclient registers those)", () => {
  const contributed = pkg.contributes.commands.map((c: { command: string }) => c.command);
  for (const name of COMMANDS) assert.ok(!contributed.includes(name), name);
});

test("package.json: activation, selector patterns, jsonValidation, grammar", () => {
  assert.equal(pkg.main, "./dist/extension.js");
  assert.deepEqual(pkg.jsonValidation ?? pkg.contributes.jsonValidation, [{ fileMatch: "*.conv.json", url: "./schemas/conversation.schema.json" }]);
  assert.equal(pkg.contributes.languages, undefined);
  const grammar = pkg.contributes.grammars[0];
  for (const scope of ["source.json", "source.yaml", "text.html.markdown"]) assert.ok(grammar.injectTo.includes(scope), scope);
});

test("document selector: file and untitled, the four patterns", () => {
  assert.equal(DOCUMENT_SELECTOR.length, 8);
  assert.deepEqual(new Set(DOCUMENT_SELECTOR.map((s) => s.scheme)), new Set(["file", "untitled"]));
  assert.deepEqual(
    [...new Set(DOCUMENT_SELECTOR.map((s) => s.pattern))],
    ["**/*.conv.json", "**/*.conv.jsonl", "**/*.conv.{yaml,yml}", "**/*.prompt.md"],
  );
});
