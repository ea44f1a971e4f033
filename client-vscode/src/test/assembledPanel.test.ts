import { vscode } from "./vscodeStub";
import assert from "node:assert/strict";
import { test } from "node:test";
import { AssembledPanel, newNonce, titleFor } from "../assembledPanel";

type Listener = (e: { document: { uri: { toString(): string } } }) => void;

function fakeWindow() {
  const panels: Array<{ html: string; posted: unknown[]; revealed: number; disposeListeners: Array<() => void>; onMessage?: (m: unknown) => void }> = [];
  let changeListener: Listener | undefined;
  (vscode.window as any).createWebviewPanel = () => {
    const p = { html: "", posted: [] as unknown[], revealed: 0, disposeListeners: [] as Array<() => void>, onMessage: undefined as ((m: unknown) => void) | undefined };
    panels.push(p);
    return {
      webview: {
        set html(v: string) { p.html = v; },
        get html() { return p.html; },
        postMessage: async (m: unknown) => void p.posted.push(m),
        onDidReceiveMessage: (l: (m: unknown) => void) => { p.onMessage = l; return { dispose() {} }; },
      },
      reveal: () => void p.revealed++,
      onDidDispose: (l: () => void) => { p.disposeListeners.push(l); return { dispose() {} }; },
      dispose: () => p.disposeListeners.forEach((l) => l()),
    };
  };
  (vscode.workspace as any).onDidChangeTextDocument = (l: Listener) => { changeListener = l; return { dispose() {} }; };
  return { panels, change: (uri: string) => changeListener?.({ document: { uri: { toString: () => uri } } }) };
}

test("shows the server's page, then sends a fresh one as the document changes", async () => {
  const w = fakeWindow();
  const asked: Array<[string, string]> = [];
  let version = 0;
  const panel = new AssembledPanel({ html: async (uri, nonce) => { asked.push([uri, nonce]); return `<main id="view">v${++version}</main>`; }, debounceMs: 5 });
  await panel.show("file:///a.conv.yaml");
  assert.equal(w.panels.length, 1);
  assert.equal(w.panels[0].html, '<main id="view">v1</main>');
  w.change("file:///other.conv.yaml");                       // another document: nothing
  w.change("file:///a.conv.yaml");
  w.change("file:///a.conv.yaml");                           // debounced into one refresh
  await new Promise((r) => setTimeout(r, 40));
  assert.deepEqual(w.panels[0].posted, [{ type: "update", html: '<main id="view">v2</main>' }]);
  assert.equal(new Set(asked.map(([, n]) => n)).size, 1, "one nonce per panel");
  await panel.show("file:///a.conv.yaml");                   // shown again: the same panel, refreshed
  assert.equal(w.panels.length, 1);
  assert.equal(w.panels[0].revealed, 1);
  panel.dispose();
  assert.equal(panel.isOpen("file:///a.conv.yaml"), false);
});

test("a server error becomes a page, not an exception", async () => {
  const w = fakeWindow();
  const panel = new AssembledPanel({ html: async () => { throw new Error("not a <conversation>"); } });
  await panel.show("file:///b.conv.json");
  assert.match(w.panels[0].html, /could not assemble file:\/\/\/b\.conv\.json: not a &lt;conversation&gt;/);
  panel.dispose();
});

test("nonce and title", () => {
  assert.match(newNonce(), /^[A-Za-z0-9]{32}$/);
  assert.notEqual(newNonce(), newNonce());
  assert.equal(titleFor("file:///w/over%20flow.conv.yaml"), "Assembled: over flow.conv.yaml");
});
