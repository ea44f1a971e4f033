// Drives a real VS Code workbench (code-server) with the promptls .vsix installed, through
// playwright-core and Debian's /usr/bin/chromium (testing-clients.md §5b).
//
// Env:
//   CS_URL      http://127.0.0.1:PORT/?folder=/path/to/ws   (code-server already listening)
//   SHOTS       folder for the screenshots (created)
//   PROFILE     a fresh, empty chromium user-data-dir
//   CONV_FILE   conversation to open from the explorer (default overflow.conv.yaml)
//   FIX_FILE    document with one fixable finding (default string-arguments.conv.json)
//   FIX_TITLE   text of the quick fix in the Ctrl+. menu (default "Pass the file_id")
//   FIRST_LINE_TEXT  text on line 1 of CONV_FILE, where the hover is asked (default "A long analysis session")
//   STATUS_RE   regexp the status bar item must match (default: "<n> / <n> tokens")
// Also set XDG_CONFIG_HOME / XDG_CACHE_HOME to a temp dir, or chromium writes into $HOME.
//
// Prints one JSON object ({ok, steps, error, timings, …texts}) on stdout; exit 0 only when every
// check passed. On failure it leaves error.png in SHOTS.
import fs from "node:fs";
import { createRequire } from "node:module";

// playwright-core lives in e2e/.cs/node_modules (install-code-server.sh), not next to this file.
const { chromium } = createRequire(new URL("./.cs/", import.meta.url))("playwright-core");

const env = process.env;
const URL_ = env.CS_URL, SHOTS = env.SHOTS, PROFILE = env.PROFILE;
const CONV = env.CONV_FILE || "overflow.conv.yaml";
const FIX = env.FIX_FILE || "string-arguments.conv.json";
const FIX_TITLE = env.FIX_TITLE || "Pass the file_id";
const STATUS_RE = new RegExp(env.STATUS_RE || String.raw`[\d.,]+k?\s*/\s*[\d.,]+k?\s+tokens`);
const EXPECTED_PROBLEMS = [                       // code, and a piece of its message
  ["history-truncated", "older messages"],
  ["compression-due", "compression trigger"],
  ["orphaned-tool-response", "is not sent"],
];
const SEGMENTS = ["system", "history", "forgotten_files", "last_user", "this_turn"];
const segmentRow = (s) => new RegExp(String.raw`\|\s*\d+\s*\|\s*${s}\s*\|`);  // "| 2 | history |"
if (!URL_ || !SHOTS || !PROFILE) { console.error("CS_URL, SHOTS and PROFILE are required"); process.exit(2); }

const t0 = Date.now();
const ms = () => Date.now() - t0;
const out = { ok: false, steps: [], timings: {} };
const step = (name) => { out.steps.push(name); out.timings[name] = ms(); };
const nbsp = (s) => s.replace(/\u00a0/g, " ");
fs.mkdirSync(SHOTS, { recursive: true });

const ctx = await chromium.launchPersistentContext(PROFILE, {
  executablePath: "/usr/bin/chromium", headless: true, viewport: { width: 1400, height: 900 },
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = ctx.pages()[0] ?? await ctx.newPage();
const activeEditor = () => page.locator(".part.editor .editor-group-container.active .monaco-editor").first();
const problems = page.locator(".markers-panel");
// Line 1 of the conversation (view-line elements are not in line order; a code lens sits above line 1).
const firstLine = () => activeEditor().locator(".view-lines .view-line").filter({ hasText: env.FIRST_LINE_TEXT || "A long analysis session" }).first();
const statusItem = page.locator(".statusbar-item").filter({ hasText: /tokens/ });

async function openFromExplorer(name) {
  await page.getByRole("treeitem", { name }).first().click({ timeout: 60000 });
  await page.locator(".tabs-container .tab.active").filter({ hasText: name }).waitFor({ timeout: 30000 });
}

async function togglePanel(visible) {
  const panel = page.locator(".part.panel");
  for (let i = 0; i < 3 && (await panel.isVisible()) !== visible; i++) {
    await page.keyboard.press("Control+j");
    await page.waitForTimeout(300);
  }
}

async function runCommand(title) {
  for (let i = 0; i < 3; i++) {
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ timeout: 10000 });
    await input.fill(">" + title);
    const row = page.locator(".quick-input-widget .monaco-list-row").filter({ hasText: title.split(": ").pop() });
    try { await row.first().waitFor({ timeout: 10000 }); await page.keyboard.press("Enter"); return; }
    catch (e) { if (i === 2) throw e; await page.keyboard.press("Escape"); }
  }
}

// The assembled view: a read-only text document, or a webview (its content sits in nested iframes).
async function assembledText() {
  const texts = [];
  for (const ed of await page.locator(".part.editor .monaco-editor .view-lines").all()) {
    texts.push(await ed.innerText().catch(() => ""));
  }
  for (const f of page.frames()) {
    if (f === page.mainFrame()) continue;
    texts.push(await f.locator("body").innerText({ timeout: 1000 }).catch(() => ""));
  }
  return nbsp(texts.join("\n"));
}

try {
  await page.goto(URL_, { waitUntil: "domcontentloaded" });
  await openFromExplorer(CONV);
  step("conv_open");

  // 1. Problems panel: the three promptls findings of the overflow example.
  await page.keyboard.press("Control+Shift+M");
  for (const [code] of EXPECTED_PROBLEMS) await problems.getByText(code).first().waitFor({ timeout: 60000 });
  out.problems_text = nbsp(await problems.innerText());
  for (const [code, msg] of EXPECTED_PROBLEMS) {
    if (!out.problems_text.includes(code) || !out.problems_text.includes(msg)) throw new Error(`Problems panel lacks ${code} / "${msg}"`);
  }
  await page.screenshot({ path: `${SHOTS}/problems.png` });
  await togglePanel(false);                              // more editor for the next screenshots
  step("problems");

  // 2. Status bar: the token total of the active document.
  // Focus the conversation's editor on line 2 (the top of the editor is the code lens, which opens the view).
  await firstLine().click({ position: { x: 5, y: 5 } });
  await page.mouse.move(700, 880);
  await statusItem.first().waitFor({ timeout: 30000 });
  for (let i = 0; i < 50 && !STATUS_RE.test(nbsp(await statusItem.first().innerText())); i++) await page.waitForTimeout(200);
  out.status_text = nbsp(await statusItem.first().innerText());
  out.status_tooltip = await statusItem.first().getAttribute("aria-label");
  if (!STATUS_RE.test(out.status_text)) throw new Error(`status bar "${out.status_text}" does not match ${STATUS_RE}`);
  await page.screenshot({ path: `${SHOTS}/status-bar.png` });
  const sb = await page.locator(".part.statusbar").boundingBox();
  await page.screenshot({ path: `${SHOTS}/status-bar-closeup.png`, clip: { x: sb.x + sb.width - 700, y: sb.y - 120, width: 700, height: 120 + sb.height } });
  step("status_bar");

  // 3. Hover on line 1: the per-segment token table.
  const line1 = await firstLine().boundingBox();
  const hover = page.locator(".monaco-hover").filter({ hasText: "history" }).filter({ hasText: "tokens" });
  for (let i = 0; i < 5; i++) {
    await page.mouse.move(line1.x + 200, line1.y + 200);                   // off, then onto line 1
    await page.mouse.move(line1.x + 20 + 4 * i, line1.y + line1.height / 2);
    try { await hover.first().waitFor({ timeout: 6000 }); break; }
    catch (e) { if (i === 4) throw e; }
  }
  out.hover_text = nbsp(await hover.first().innerText());
  for (const s of ["system", "history", "tokens"]) if (!out.hover_text.includes(s)) throw new Error(`hover lacks "${s}"`);
  await page.screenshot({ path: `${SHOTS}/hover.png` });
  await page.keyboard.press("Escape");
  await page.mouse.move(700, 880);
  step("hover");

  // 4. Show Assembled Context: the webview drawn by the server (server/htmlview.py).
  await runCommand("promptls: Show Assembled Context");
  let view;
  for (let i = 0; i < 100 && !view; i++) {
    for (const f of page.frames()) {
      if (f !== page.mainFrame() && (await f.locator("main#view table").count().catch(() => 0)) > 0) view = f;
    }
    if (!view) await page.waitForTimeout(300);
  }
  if (!view) throw new Error("no webview with the assembled view");
  await view.locator("button.jump").first().waitFor({ timeout: 30000 });
  let text = nbsp(await view.locator("main#view").innerText());
  out.webview_text = text.slice(0, 6000);
  out.webview_parts = await view.locator(".bar .part").evaluateAll((els) => els.map((e) => e.className.replace("part ", "")));
  out.webview_dropped_rows = await view.locator("tr.dropped").count();
  out.webview_marker = await view.locator(".marker").getAttribute("title");
  // Theme colours: the bar's history part is painted with the theme's charts.blue.
  out.webview_history_colour = await view.locator(".bar .part.history").evaluate((e) => getComputedStyle(e).backgroundColor);
  out.webview_theme_blue = await view.locator("body").evaluate((e) => getComputedStyle(e).getPropertyValue("--vscode-charts-blue").trim());
  const missing = SEGMENTS.filter((s) => !text.includes(s));
  if (missing.length) throw new Error(`assembled view lacks segments ${missing.join(", ")}`);
  await page.keyboard.press("Control+b");                // the side bar off: room for the view
  for (let i = 0; i < 4; i++) await runCommand("View: Decrease Current View Size");   // the source editor narrower
  await page.waitForTimeout(800);
  await page.screenshot({ path: `${SHOTS}/assembled-view.png` });
  await page.keyboard.press("Control+b");
  step("assembled_view");

  // 4b. A click on a message id puts the cursor on that message in the document.
  const cursor = page.locator(".statusbar-item").filter({ hasText: /Ln \d+, Col \d+/ }).first();
  const lineOf = async (id) => Number(/line (\d+)/.exec(await view.locator("button.jump", { hasText: new RegExp(`^${id.replace("$", "\\$")}$`) }).getAttribute("title"))[1]);
  const waitLine = async (n) => {
    for (let i = 0; i < 50; i++) { const m = /Ln (\d+)/.exec(nbsp(await cursor.innerText().catch(() => ""))); if (m && Number(m[1]) === n) return; await page.waitForTimeout(200); }
    throw new Error(`cursor not on line ${n}: ${await cursor.innerText().catch(() => "?")}`);
  };
  out.m19_line = await lineOf("m19");
  await view.locator("button.jump", { hasText: /^m19$/ }).click();
  await waitLine(out.m19_line);
  out.click_cursor = nbsp(await cursor.innerText());
  step("webview_click");

  // 4c. Keyboard: focus m12, ArrowDown moves to m13, Enter jumps there.
  out.m13_line = await lineOf("m13");
  await view.locator("button.jump", { hasText: /^m12$/ }).focus();
  await page.keyboard.press("ArrowDown");
  out.focused_after_arrow = await view.evaluate(() => document.activeElement?.textContent ?? "");
  await page.keyboard.press("Enter");
  await waitLine(out.m13_line);
  out.keyboard_cursor = nbsp(await cursor.innerText());
  step("webview_keyboard");

  // 4d. Live: rename m19 in the document; the view follows without being reopened.
  await view.locator("button.jump", { hasText: /^m19$/ }).click();
  await waitLine(out.m19_line);
  await page.keyboard.press("End");
  await page.keyboard.type("x");
  await view.locator("button.jump", { hasText: /^m19x$/ }).waitFor({ timeout: 30000 });
  out.live_text = nbsp(await view.locator("main#view table").innerText()).slice(0, 3000);
  await page.keyboard.press("Control+s");
  await page.screenshot({ path: `${SHOTS}/assembled-view-live.png` });
  step("webview_live");

  // 4e. The Markdown export: a read-only Markdown document of the same assembly.
  await runCommand("promptls: Export Assembled Context as Markdown");
  await page.locator(".tabs-container .tab").filter({ hasText: "(assembled)" }).first().waitFor({ timeout: 30000 });
  text = "";
  for (let i = 0; i < 100; i++) {
    text = await assembledText();
    // The title and the segment table's rows (the top of the document: an editor draws only
    // the lines in view, so the "## n. segment ·" headings further down may never show).
    if (text.includes("# Assembled context") && SEGMENTS.every((s) => segmentRow(s).test(text))) break;
    await page.waitForTimeout(300);
  }
  out.assembled_text = text.slice(0, 4000);
  out.tabs = (await page.locator(".tabs-container .tab").allInnerTexts()).map(nbsp);
  step("markdown_export");

  // 5. Quick fix in the fixable document: Problems row -> Ctrl+. -> the fix -> Enter.
  await runCommand("View: Close All Editors");           // one wide editor for the fix screenshots
  await page.locator(".part.editor .tabs-container .tab").first().waitFor({ state: "detached", timeout: 10000 });
  await openFromExplorer(FIX);
  await togglePanel(true);                               // reopens Problems, the panel's last view
  if (!(await problems.isVisible())) await page.keyboard.press("Control+Shift+M");
  await problems.waitFor({ timeout: 10000 });
  const fixRow = problems.locator(".monaco-list-row").filter({ hasText: "filename-instead-of-file-id" });
  await fixRow.first().waitFor({ timeout: 60000 });
  await activeEditor().locator(".squiggly-error").first().waitFor({ timeout: 30000 });
  out.fix_problem_text = nbsp(await fixRow.first().innerText());
  await fixRow.first().dblclick();                       // selects the finding's range, focuses the editor
  await page.waitForTimeout(300);
  const menu = page.locator(".action-widget");
  for (let i = 0; i < 6; i++) {                         // Ctrl+. can race the first codeAction round-trip
    await page.keyboard.press("Control+.");
    try { await menu.getByText(FIX_TITLE).first().waitFor({ timeout: 5000 }); break; }
    catch (e) { if (i === 5) throw e; await page.keyboard.press("Escape"); }
  }
  out.quickfix_menu = nbsp(await menu.innerText());
  await page.screenshot({ path: `${SHOTS}/quickfix.png` });
  await page.keyboard.press("Enter");                    // the fix is the first, focused item
  await fixRow.first().waitFor({ state: "detached", timeout: 30000 });
  await activeEditor().locator(".squiggly-error").first().waitFor({ state: "detached", timeout: 30000 });
  out.after_fix_text = nbsp(await activeEditor().locator(".view-lines").innerText());
  if (!/file_id\\?"\s*:\s*\\?"5f0c2a9e/.test(out.after_fix_text.replace(/\s+/g, " "))) throw new Error("the fix did not write the file_id");
  await page.screenshot({ path: `${SHOTS}/after-fix.png` });
  step("quick_fix");

  out.ok = true;
} catch (e) {
  out.error = String(e?.stack || e).slice(0, 3000);
  await page.screenshot({ path: `${SHOTS}/error.png` }).catch(() => {});
} finally {
  await ctx.close().catch(() => {});
  out.timings.total_ms = ms();
  console.log(JSON.stringify(out, null, 1));
  process.exit(out.ok ? 0 : 1);
}
