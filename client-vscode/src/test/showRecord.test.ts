// The code lens of a dataset record runs `promptls.showAssembled` with [uri, record]: the client
// hook, the panel and the `promptls.assembledHtml` request all carry that record.
import { vscode } from "./vscodeStub";
import assert from "node:assert/strict";
import { test } from "node:test";
import { AssembledPanel, titleFor } from "../assembledPanel";
import { assembledHtml, executeCommandMiddleware } from "../client";

const URI = "file:///w/train.conv.jsonl";

test("the showAssembled hook forwards the lens' record", async () => {
  const shown: Array<[string, number | undefined]> = [];
  const run = executeCommandMiddleware({ onShowAssembled: (uri, record) => void shown.push([uri, record]) });
  const sent: Array<[string, unknown[]]> = [];
  const next = async (command: string, args: unknown[]) => {
    sent.push([command, args]);
    return { ok: true };
  };
  assert.deepEqual(await run("promptls.showAssembled", [URI, 2], next), { ok: true });
  await run("promptls.showAssembled", ["file:///w/a.conv.json"], next);
  await run("promptls.showAssembled", [URI, "2"], next);   // not a record number: the document
  await run("promptls.assemble", [URI, 3], next);          // another command: no view
  assert.deepEqual(shown, [[URI, 2], ["file:///w/a.conv.json", undefined], [URI, undefined]]);
  assert.deepEqual(sent[0], ["promptls.showAssembled", [URI, 2]], "the server gets the record too");
});

test("the template lens' showTemplateDiff answer is shown as Markdown", async () => {
  const shown: string[] = [];
  const run = executeCommandMiddleware({
    onShowAssembled: () => assert.fail("not the assembled view"),
    onShowTemplateDiff: (diff) => void shown.push(diff.markdown),
  });
  const answer = { template: "p.prompt.md", title: "t", conversations: ["a.conv.yaml", "b.conv.yaml"], delta: 86, markdown: "## diff" };
  assert.deepEqual(await run("promptls.showTemplateDiff", ["file:///w/p.prompt.md"], async () => answer), answer);
  await run("promptls.showTemplateDiff", ["file:///w/p.prompt.md"], async () => null); // refused: nothing shown
  assert.deepEqual(shown, ["## diff"]);
});

test("assembledHtml asks the server for the record", async () => {
  const requests: unknown[] = [];
  const client = {
    isRunning: () => true,
    sendRequest: async (_type: unknown, params: unknown) => {
      requests.push(params);
      return { html: "<p>page</p>" };
    },
  } as unknown as Parameters<typeof assembledHtml>[0];
  assert.equal(await assembledHtml(client, URI, "n0nce", 2), "<p>page</p>");
  await assembledHtml(client, URI, "n0nce");
  assert.deepEqual(requests, [
    { command: "promptls.assembledHtml", arguments: [URI, { nonce: "n0nce", record: 2 }] },
    { command: "promptls.assembledHtml", arguments: [URI, { nonce: "n0nce" }] },
  ]);
});

test("the panel shows the record asked for and names it in its title", async () => {
  const panels: Array<{ title: string; html: string; posted: unknown[] }> = [];
  (vscode.window as any).createWebviewPanel = (_type: string, title: string) => {
    const p = { title, html: "", posted: [] as unknown[] };
    panels.push(p);
    return {
      webview: {
        set html(v: string) { p.html = v; },
        get html() { return p.html; },
        postMessage: async (m: unknown) => void p.posted.push(m),
        onDidReceiveMessage: () => ({ dispose() {} }),
      },
      set title(v: string) { p.title = v; },
      get title() { return p.title; },
      reveal: () => undefined,
      onDidDispose: () => ({ dispose() {} }),
      dispose: () => undefined,
    };
  };
  (vscode.workspace as any).onDidChangeTextDocument = () => ({ dispose() {} });
  const asked: Array<number | undefined> = [];
  const panel = new AssembledPanel({ html: async (_uri, _nonce, record) => { asked.push(record); return `record ${record}`; } });
  await panel.show(URI, 2);
  assert.equal(panels[0].title, "Assembled: train.conv.jsonl (record 2)");
  assert.equal(panels[0].html, "record 2");
  await panel.show(URI, 3);                                  // another lens: the same panel, retitled
  assert.equal(panels.length, 1);
  assert.equal(panels[0].title, "Assembled: train.conv.jsonl (record 3)");
  assert.deepEqual(panels[0].posted, [{ type: "update", html: "record 3" }]);
  await panel.show(URI);                                     // the palette command: keeps its record
  assert.deepEqual(asked, [2, 3, 3]);
  assert.equal(titleFor("file:///w/a.conv.json"), "Assembled: a.conv.json");
  panel.dispose();
});
