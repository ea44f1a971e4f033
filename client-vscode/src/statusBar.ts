// The status bar item of the active promptls document: `98k / 122k tokens` from the server's
// `promptls.assemble` answer; click opens the assembled view.
import type * as vscode from "vscode";
import type { Assembled } from "./lspExt";
import * as api from "./vscodeapi";

export type Level = "normal" | "warning" | "error";

export interface StatusInfo {
  text: string;
  tooltip: string;
  level: Level;
}

/** Error diagnostics that colour the item red. */
export const OVER_BUDGET_CODES = ["budget-overrun", "last-turn-over-budget"];

/** `812`, `5.1k`, `98k`, `1.2M`. */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 10_000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
  if (n < 1_000_000) return `${Math.round(n / 1000)}k`;
  return `${(n / 1_000_000).toFixed(1).replace(/\.0$/, "")}M`;
}

export function statusOf(a: Assembled): StatusInfo {
  const total = a.budget.used + a.budget.tools;
  const available = a.budget.available_tokens;
  const over = (a.diagnostics ?? []).filter((d) => d.severity === "error" && OVER_BUDGET_CODES.includes(d.code));
  const compressed = Boolean(a.compression?.triggered);
  const level: Level = over.length > 0 ? "error" : compressed ? "warning" : "normal";
  const lines = [
    `promptls: ${total.toLocaleString("en-US")} of ${available.toLocaleString("en-US")} input tokens (${a.encoding ?? "?"})`,
    ...a.segments.map((s) => `${s.name}: ${s.tokens.toLocaleString("en-US")}`),
    `tools: ${a.budget.tools.toLocaleString("en-US")}`,
  ];
  if (compressed) lines.push("compression triggered");
  for (const d of over) lines.push(`${d.code}: ${d.message}`);
  lines.push("Click to show the assembled context");
  return { text: `$(symbol-numeric) ${formatTokens(total)} / ${formatTokens(available)} tokens`, tooltip: lines.join("\n"), level };
}

export const LEVEL_COLOURS: Record<Level, string | undefined> = {
  normal: undefined,
  warning: "statusBarItem.warningBackground",
  error: "statusBarItem.errorBackground",
};

export interface StatusDeps {
  /** The §7 JSON of a document, or undefined when the server cannot answer. */
  assemble(uri: string): Promise<Assembled | undefined>;
  /** Whether a document is a promptls document. */
  isPromptDocument(doc: vscode.TextDocument): boolean;
  /** Command run on click, with the document URI. */
  showCommand: string;
  debounceMs?: number;
}

export class StatusBar implements vscode.Disposable {
  private readonly item = api.createStatusBarItem("promptls.tokens", 100);
  private readonly subscriptions: vscode.Disposable[] = [];
  private timer: NodeJS.Timeout | undefined;
  private generation = 0;

  constructor(private readonly deps: StatusDeps) {
    this.item.name = "promptls tokens";
    this.subscriptions.push(
      api.onDidChangeActiveTextEditor(() => this.refresh()),
      api.onDidChangeTextDocument((e) => {
        if (e.document === api.activeTextEditor()?.document) this.schedule();
      }),
    );
  }

  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), this.deps.debounceMs ?? 400);
  }

  async refresh(): Promise<void> {
    const generation = ++this.generation;
    const doc = api.activeTextEditor()?.document;
    if (!doc || !this.deps.isPromptDocument(doc)) {
      this.item.hide();
      return;
    }
    const uri = doc.uri.toString();
    const a = await this.deps.assemble(uri).catch(() => undefined);
    if (generation !== this.generation) return;
    if (!a) {
      this.item.hide();
      return;
    }
    const info = statusOf(a);
    this.item.text = info.text;
    this.item.tooltip = info.tooltip;
    const colour = LEVEL_COLOURS[info.level];
    this.item.backgroundColor = colour ? api.themeColor(colour) : undefined;
    this.item.command = { title: "Show Assembled Context", command: this.deps.showCommand, arguments: [uri] };
    this.item.show();
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.item.dispose();
    for (const s of this.subscriptions) s.dispose();
  }
}
