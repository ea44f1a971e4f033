// The assembled view as a webview beside its document: the server draws it (server/htmlview.py,
// the renderer of `promptls assemble --format html`), this module only hosts it: it asks for the
// page, sends a fresh one while the document changes, and reveals a message when one is selected.
// One panel per document; for a dataset (JSON Lines) it shows the record last asked for (the
// code lens of each record passes its number) and its title names that record.
import type * as vscode from "vscode";
import * as api from "./vscodeapi";

export const VIEW_TYPE = "promptls.assembledView";

export interface PanelDeps {
  /** The page for a document URI (one record of a dataset, 1-based; undefined: the server's
   * default, the first), its script allowed by `nonce`; undefined when no server runs. */
  html(uri: string, nonce: string, record?: number): Promise<string | undefined>;
  debounceMs?: number;
}

interface Open {
  panel: vscode.WebviewPanel;
  nonce: string;
  record?: number;
  timer?: NodeJS.Timeout;
}

export function newNonce(): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let s = "";
  for (let i = 0; i < 32; i++) s += chars.charAt(Math.floor(Math.random() * chars.length));
  return s;
}

export function titleFor(source: string, record?: number): string {
  const name = decodeURIComponent(source.split("/").pop() ?? "document");
  return `Assembled: ${name}${record === undefined ? "" : ` (record ${record})`}`;
}

function errorPage(text: string): string {
  const esc = text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);
  return `<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'"></head><body><main id="view"><p>${esc}</p></main></body></html>`;
}

export class AssembledPanel implements vscode.Disposable {
  private readonly open = new Map<string, Open>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly deps: PanelDeps) {
    this.subscriptions.push(api.onDidChangeTextDocument((e) => this.sourceChanged(e.document.uri.toString())));
  }

  /** Opens the view of `source` beside it, or brings it forward and refreshes it. `record`
   * (1-based) picks a conversation of a dataset; without it an open view keeps its record. */
  async show(source: string, record?: number): Promise<void> {
    const existing = this.open.get(source);
    if (existing) {
      if (record !== undefined && record !== existing.record) {
        existing.record = record;
        existing.panel.title = titleFor(source, record);
      }
      existing.panel.reveal(undefined, true);
      await this.refresh(source);
      return;
    }
    const panel = api.createWebviewPanel(VIEW_TYPE, titleFor(source, record));
    const entry: Open = { panel, nonce: newNonce(), record };
    this.open.set(source, entry);
    panel.onDidDispose(() => {
      if (entry.timer) clearTimeout(entry.timer);
      this.open.delete(source);
    });
    panel.webview.onDidReceiveMessage((msg: { type?: string; line?: unknown; column?: unknown }) => {
      if (msg?.type === "reveal" && typeof msg.line === "number" && typeof msg.column === "number") {
        void api.revealInDocument(source, msg.line, msg.column);
      }
    });
    panel.webview.html = await this.page(source, entry);
  }

  /** Sends a fresh page; the view's script swaps it in, keeping focus and scroll. */
  async refresh(source: string): Promise<void> {
    const entry = this.open.get(source);
    if (!entry) return;
    const html = await this.page(source, entry);
    if (this.open.get(source) === entry) void entry.panel.webview.postMessage({ type: "update", html });
  }

  isOpen(source: string): boolean {
    return this.open.has(source);
  }

  private async page(source: string, entry: Open): Promise<string> {
    try {
      return (await this.deps.html(source, entry.nonce, entry.record)) ?? errorPage(`The promptls server is not running; no view of ${source}.`);
    } catch (error) {
      return errorPage(`The server could not assemble ${source}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private sourceChanged(source: string): void {
    const entry = this.open.get(source);
    if (!entry) return;
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      void this.refresh(source);
    }, this.deps.debounceMs ?? 300);
  }

  dispose(): void {
    for (const e of this.open.values()) {
      if (e.timer) clearTimeout(e.timer);
      e.panel.dispose();
    }
    this.open.clear();
    for (const s of this.subscriptions) s.dispose();
  }
}
