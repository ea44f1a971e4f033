// Wiring only: output channel, client lifecycle, status bar, assembled view (a webview) and its
// Markdown export, commands and the
// configuration listener (restart debounce).
import type * as vscode from "vscode";
import { DidChangeConfigurationNotification, type LanguageClient } from "vscode-languageclient/node";
import { AssembledPanel } from "./assembledPanel";
import { AssembledView } from "./assembledView";
import { DOCUMENT_SELECTOR, assemble, assembledHtml, serverCommand, startClient } from "./client";
import type { TemplateDiff } from "./lspExt";
import { needsRestart } from "./settings";
import { StatusBar } from "./statusBar";
import * as api from "./vscodeapi";

export const SHOW_ASSEMBLED_CONTEXT = "promptls.showAssembledContext";
export const EXPORT_ASSEMBLED_MARKDOWN = "promptls.exportAssembledMarkdown";
export const RESTART_SERVER = "promptls.restartServer";
export const LINT_WORKSPACE = "promptls.lintWorkspace";
const RESTART_DELAY_MS = 1000;
const LINT_MAX_FILES = 2000;
// PATTERNS (client.ts) as one glob, without nested braces.
const LINT_GLOB = "**/*.{conv.json,conv.jsonl,conv.yaml,conv.yml,prompt.md}";

let client: LanguageClient | undefined;
let starting: Promise<void> | undefined;
let restartTimer: NodeJS.Timeout | undefined;

const isPromptDocument = (doc: vscode.TextDocument): boolean => api.matchesSelector(DOCUMENT_SELECTOR, doc);

export interface CommandHandlers {
  showAssembledContext(uri?: unknown): Promise<void>;
  exportAssembledMarkdown(uri?: unknown): Promise<void>;
  restartServer(): Promise<void>;
  lintWorkspace(): Promise<void>;
}

/** The commands of package.json `contributes.commands`, registered here and nowhere else. */
export function registerCommands(h: CommandHandlers): vscode.Disposable[] {
  return [
    api.registerCommand(SHOW_ASSEMBLED_CONTEXT, (uri?: unknown) => h.showAssembledContext(uri)),
    api.registerCommand(EXPORT_ASSEMBLED_MARKDOWN, (uri?: unknown) => h.exportAssembledMarkdown(uri)),
    api.registerCommand(RESTART_SERVER, () => h.restartServer()),
    api.registerCommand(LINT_WORKSPACE, () => h.lintWorkspace()),
  ];
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const activated = Date.now();
  const out = api.createOutputChannel("promptls");
  const request = (uri: string) => ensureStarted().then(() => assemble(client, uri));
  const view = new AssembledView({ assemble: request });
  const panel = new AssembledPanel({
    html: (uri, nonce, record) => ensureStarted().then(() => assembledHtml(client, uri, nonce, record)),
  });
  const status = new StatusBar({ assemble: request, isPromptDocument, showCommand: SHOW_ASSEMBLED_CONTEXT });
  const hooks = {
    output: out,
    onShowAssembled: (uri: string, record?: number) => void panel.show(uri, record),
    onShowTemplateDiff: (diff: TemplateDiff) => void api.showMarkdown(diff.markdown),
  };

  const start = async (): Promise<void> => {
    client = await startClient(await serverCommand(out), hooks);
    void status.refresh();
  };
  const ensureStarted = (): Promise<void> => (starting ??= start());
  const restart = async (): Promise<void> => {
    const old = client;
    client = undefined;
    starting = undefined;
    await old?.stop().catch((e: unknown) => out.warn(`stopping the server: ${String(e)}`));
    await ensureStarted();
  };

  context.subscriptions.push(
    out,
    view,
    panel,
    status,
    { dispose: () => void client?.stop().catch(() => undefined) },
    ...registerCommands({
      showAssembledContext: async (uri?: unknown) => {
        const source = sourceArgument(uri);
        if (!source) return;
        await ensureStarted();
        await panel.show(source);
      },
      exportAssembledMarkdown: async (uri?: unknown) => {
        const source = sourceArgument(uri);
        if (!source) return;
        await ensureStarted();
        await view.show(source);
      },
      restartServer: restart,
      lintWorkspace: async () => {
        await ensureStarted();
        // Opening the documents makes the client send didOpen: the server's diagnostics fill Problems.
        await api.withProgress("promptls: linting the workspace", async () => {
          const uris = await api.findFiles(LINT_GLOB, "**/{node_modules,.git,.venv}/**", LINT_MAX_FILES);
          for (const uri of uris) await api.openTextDocument(uri);
          out.info(`lint workspace: opened ${uris.length} documents`);
        });
        await api.executeCommand("workbench.actions.view.problems");
      },
    }),
    api.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration("promptls")) return;
      if (needsRestart((s) => e.affectsConfiguration(s))) {
        if (restartTimer) clearTimeout(restartTimer);
        restartTimer = setTimeout(() => void restart(), RESTART_DELAY_MS);
      } else if (client?.isRunning()) {
        // settings: null → the server pulls workspace/configuration (answered in client.ts).
        void client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
        status.schedule();
      }
    }),
    // Start the server with the first promptls document, not for every JSON/YAML/Markdown file.
    api.onDidOpenTextDocument((doc) => {
      if (isPromptDocument(doc)) void ensureStarted();
    }),
  );
  if (api.textDocuments().some(isPromptDocument)) void ensureStarted();
  out.info(`activated in ${Date.now() - activated} ms`);
}

/** The document a command is about: its argument, else the active editor's (or a hint to open one). */
function sourceArgument(uri?: unknown): string | undefined {
  const source = typeof uri === "string" ? uri : (uri as vscode.Uri | undefined)?.toString() ?? api.activeTextEditor()?.document.uri.toString();
  if (!source) void api.showInformationMessage("promptls: open a conversation document (*.conv.json, *.conv.jsonl, *.conv.yaml) first.");
  return source;
}

export async function deactivate(): Promise<void> {
  if (restartTimer) clearTimeout(restartTimer);
  await client?.stop().catch(() => undefined);
}
