// The assembled view: a read-only virtual Markdown document (scheme `promptls-assembled`)
// rendering the server's `promptls.assemble` answer; it follows its source as it changes.
import type * as vscode from "vscode";
import type { Assembled } from "./lspExt";
import * as api from "./vscodeapi";

export const SCHEME = "promptls-assembled";

const fence = (text: string): string => {
  let ticks = "```";
  while (text.includes(ticks)) ticks += "`";
  return ticks;
};

function block(text: string, lang = ""): string {
  const f = fence(text);
  return `${f}${lang}\n${text}\n${f}`;
}

function n(x: number): string {
  return x.toLocaleString("en-US");
}

function renderMessage(id: string, entry: { tokens: number; cache?: boolean } | undefined, message: Record<string, unknown> | undefined): string {
  const role = typeof message?.role === "string" ? message.role : "?";
  const head = `#### \`${id}\` · ${role} · ${entry ? n(entry.tokens) : "?"} tokens${entry?.cache ? " · cached prefix" : ""}`;
  if (!message) return `${head}\n\n_(not in the assembled messages)_`;
  const { role: _role, content, ...rest } = message;
  const parts: string[] = [head];
  if (typeof content === "string") parts.push(block(content));
  else if (content !== undefined && content !== null) parts.push(block(JSON.stringify(content, null, 2), "json"));
  if (Object.keys(rest).length > 0) parts.push(block(JSON.stringify(rest, null, 2), "json"));
  return parts.join("\n\n");
}

/** Readable Markdown: budget, then the eight segments in order with their provider-format messages. */
export function renderAssembled(a: Assembled): string {
  const b = a.budget;
  const total = b.used + b.tools;
  const out: string[] = [];
  out.push(`# Assembled context: ${a.file}`);
  out.push(
    [
      `**${n(total)} / ${n(b.available_tokens)} tokens** (used ${n(b.used)} + tools ${n(b.tools)}), ` +
        `window ${n(b.max_input_tokens)}, safety margin ${b.safety_margin}, history budget ${n(b.history_budget)}.`,
      `Encoding \`${a.encoding ?? "?"}\`${a.encoding_requested && a.encoding_requested !== a.encoding ? ` (requested \`${a.encoding_requested}\`)` : ""}` +
        `${a.settings?.provider ? `, provider \`${String(a.settings.provider)}\`` : ""}` +
        `${a.settings?.model ? `, model \`${String(a.settings.model)}\`` : ""}.`,
    ].join("\n"),
  );
  if (a.compression?.triggered) {
    out.push(`> **Compression triggered**: history ${n(Number(a.compression.history_tokens ?? 0))} tokens over the threshold of ${n(Number(a.compression.threshold ?? 0))}.`);
  }
  if (a.dropped && a.dropped.length > 0) out.push(`Dropped (not sent): ${a.dropped.map((d) => `\`${d}\``).join(", ")}`);
  out.push(
    ["| # | segment | tokens | messages |", "|---|---|---:|---:|", ...a.segments.map((s, i) => `| ${i + 1} | ${s.name} | ${n(s.tokens)} | ${s.messages.length} |`)].join("\n"),
  );
  const index = new Map<string, number>();
  a.layout.forEach((e, i) => index.set(e.id, i));
  a.segments.forEach((s, i) => {
    out.push(`## ${i + 1}. ${s.name} · ${n(s.tokens)} tokens`);
    if (s.messages.length === 0) out.push("_(empty)_");
    for (const id of s.messages) {
      const at = index.get(id);
      out.push(renderMessage(id, at === undefined ? undefined : a.layout[at], at === undefined ? undefined : a.messages[at]));
    }
  });
  const diags = a.diagnostics ?? [];
  if (diags.length > 0) {
    out.push("## Diagnostics");
    out.push(diags.map((d) => `- **${d.severity}** \`${d.code}\`${d.range ? ` (line ${d.range.start.line})` : ""}: ${d.message}`).join("\n"));
  }
  return out.join("\n\n") + "\n";
}

/** `promptls-assembled:/<name> (assembled).md?<source uri>`: the `.md` makes it Markdown. */
export function viewUriFor(source: string): string {
  const name = decodeURIComponent(source.split("/").pop() ?? "document");
  return `${SCHEME}:/${encodeURIComponent(`${name} (assembled).md`)}?${encodeURIComponent(source)}`;
}

export function sourceOf(view: vscode.Uri): string {
  return decodeURIComponent(view.query);
}

export interface ViewDeps {
  assemble(uri: string): Promise<Assembled | undefined>;
  debounceMs?: number;
}

export class AssembledView implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = api.newEventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [];
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(private readonly deps: ViewDeps) {
    this.subscriptions.push(
      api.registerTextDocumentContentProvider(SCHEME, this),
      api.onDidChangeTextDocument((e) => this.sourceChanged(e.document.uri.toString())),
    );
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const source = sourceOf(uri);
    try {
      const a = await this.deps.assemble(source);
      return a ? renderAssembled(a) : `# Assembled context\n\nThe server gave no answer for ${source}.\n`;
    } catch (error) {
      return `# Assembled context\n\nThe server could not assemble ${source}:\n\n${block(error instanceof Error ? error.message : String(error))}\n`;
    }
  }

  /** Opens (or re-renders) the view of a source document beside it. */
  async show(source: string): Promise<void> {
    const uri = api.parseUri(viewUriFor(source));
    this.changed.fire(uri);
    await api.showDocument(uri);
  }

  private sourceChanged(source: string): void {
    const view = viewUriFor(source);
    if (!api.textDocuments().some((d) => d.uri.toString() === api.parseUri(view).toString())) return;
    const pending = this.timers.get(source);
    if (pending) clearTimeout(pending);
    this.timers.set(
      source,
      setTimeout(() => {
        this.timers.delete(source);
        this.changed.fire(api.parseUri(view));
      }, this.deps.debounceMs ?? 400),
    );
  }

  dispose(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.changed.dispose();
    for (const s of this.subscriptions) s.dispose();
  }
}
