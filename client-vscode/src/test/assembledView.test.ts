import "./vscodeStub";
import assert from "node:assert/strict";
import { test } from "node:test";
import { renderAssembled, viewUriFor } from "../assembledView";
import { sample } from "./sample";

test("renders the eight segments in order with token counts", () => {
  const md = renderAssembled(sample({}));
  const headings = [...md.matchAll(/^## (\d)\. (\w+) · (\S+) tokens$/gm)].map((m) => `${m[1]} ${m[2]} ${m[3]}`);
  assert.deepEqual(headings, [
    "1 system 10",
    "2 history 0",
    "3 custom_agent 0",
    "4 project_files 0",
    "5 forgotten_files 0",
    "6 last_user 5",
    "7 this_turn 0",
    "8 reminder 0",
  ]);
  assert.match(md, /\*\*15 \/ 121,600 tokens\*\*/);
});

test("each message in provider format, fences that survive backticks", () => {
  const md = renderAssembled(sample({}));
  assert.match(md, /#### `\$system` · system · 10 tokens · cached prefix/);
  assert.match(md, /````\nYou are helpful\.\n```\ncode\n```\n````/);
  assert.match(md, /#### `m1` · user · 5 tokens\n\n```json\n\[\n  \{\n    "type": "text"/);
});

test("compression and diagnostics are shown", () => {
  const md = renderAssembled({
    ...sample({}),
    compression: { triggered: true, threshold: 2718, history_tokens: 3810 },
    diagnostics: [{ code: "budget-overrun", severity: "error", message: "too big", range: { start: { line: 3, column: 1 }, end: { line: 3, column: 2 } } }],
  });
  assert.match(md, /Compression triggered\*\*: history 3,810 tokens over the threshold of 2,718/);
  assert.match(md, /- \*\*error\*\* `budget-overrun` \(line 3\): too big/);
});

test("view URI is Markdown and carries the source", () => {
  const uri = viewUriFor("file:///w/examples/a%20b.conv.json");
  assert.ok(uri.startsWith("promptls-assembled:/a%20b.conv.json%20(assembled).md?"));
  assert.equal(decodeURIComponent(uri.split("?")[1]), "file:///w/examples/a%20b.conv.json");
});
