import "./vscodeStub";
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Assembled } from "../lspExt";
import { LEVEL_COLOURS, formatTokens, statusOf } from "../statusBar";
import { sample } from "./sample";

test("formatTokens", () => {
  assert.equal(formatTokens(812), "812");
  assert.equal(formatTokens(5087), "5.1k");
  assert.equal(formatTokens(4000), "4k");
  assert.equal(formatTokens(97_600), "98k");
  assert.equal(formatTokens(121_600), "122k");
  assert.equal(formatTokens(1_048_576), "1M");
});

test("text is used+tools of available", () => {
  const s = statusOf(sample({ used: 97_200, tools: 400, available_tokens: 121_600 }));
  assert.equal(s.text, "$(symbol-numeric) 98k / 122k tokens");
  assert.equal(s.level, "normal");
  assert.equal(LEVEL_COLOURS[s.level], undefined);
  assert.match(s.tooltip, /97,600 of 121,600/);
});

test("warning colour when compression triggered", () => {
  const a: Assembled = { ...sample({}), compression: { triggered: true, threshold: 10, history_tokens: 20 } };
  const s = statusOf(a);
  assert.equal(s.level, "warning");
  assert.equal(LEVEL_COLOURS[s.level], "statusBarItem.warningBackground");
});

test("error colour over budget, whatever compression says", () => {
  for (const code of ["budget-overrun", "last-turn-over-budget"]) {
    const a: Assembled = {
      ...sample({}),
      compression: { triggered: true },
      diagnostics: [{ code, severity: "error", message: "over" }],
    };
    assert.equal(statusOf(a).level, "error", code);
  }
  const demoted: Assembled = { ...sample({}), diagnostics: [{ code: "budget-overrun", severity: "warning", message: "over" }] };
  assert.equal(statusOf(demoted).level, "normal");
});
