// Owns the LanguageClient: the server command line, client options, start and restart.
import type * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import {
  ASSEMBLE_COMMAND,
  ASSEMBLED_HTML_COMMAND,
  SHOW_ASSEMBLED_COMMAND,
  SHOW_TEMPLATE_DIFF_COMMAND,
  type Assembled,
  type TemplateDiff,
} from "./lspExt";
import {
  SECTION,
  type ServerCommand,
  configurationAnswers,
  explicitSettings,
  initializationOptions,
  resolveServerCommand,
  startFailureMessage,
} from "./settings";
import * as api from "./vscodeapi";

export const PATTERNS = ["**/*.conv.json", "**/*.conv.jsonl", "**/*.conv.{yaml,yml}", "**/*.prompt.md"];

/** Our documents keep their JSON/YAML/Markdown language: selected by file pattern. */
export const DOCUMENT_SELECTOR = ["file", "untitled"].flatMap((scheme) => PATTERNS.map((pattern) => ({ scheme, pattern })));

export interface ClientHooks {
  output: vscode.LogOutputChannel;
  /** The server answered the code lens' `promptls.showAssembled`: open the view (of the
   * lens' record, 1-based, when the document is a dataset; else undefined). */
  onShowAssembled(uri: string, record?: number): void;
  /** The server answered the template lens' `promptls.showTemplateDiff`: show its Markdown. */
  onShowTemplateDiff(diff: TemplateDiff): void;
}

/** The document and record of a `promptls.showAssembled` command's arguments, as the code lens
 * sends them (`[uri]`, or `[uri, record]` on each record of a dataset). */
export function showAssembledTarget(args: unknown[]): { uri: string; record?: number } | undefined {
  const [uri, record] = args;
  if (typeof uri !== "string") return undefined;
  return Number.isInteger(record) && (record as number) >= 1 ? { uri, record: record as number } : { uri };
}

type ExecuteCommandMiddleware = (command: string, args: any[], next: (command: string, args: any[]) => Promise<unknown>) => Promise<unknown>;

/** Runs a server command; after `promptls.showAssembled` (the code lens), opens the view of its record. */
export function executeCommandMiddleware(
  hooks: Pick<ClientHooks, "onShowAssembled"> & Partial<Pick<ClientHooks, "onShowTemplateDiff">>,
): ExecuteCommandMiddleware {
  return async (command, args, next) => {
    const result: any = await next(command, args);
    const target = command === SHOW_ASSEMBLED_COMMAND ? showAssembledTarget(args) : undefined;
    if (target) hooks.onShowAssembled(target.uri, target.record);
    if (command === SHOW_TEMPLATE_DIFF_COMMAND && typeof result?.markdown === "string") {
      hooks.onShowTemplateDiff?.(result as TemplateDiff);
    }
    return result;
  };
}

/** The promptls settings of a scope, as the server reads them (only what the user set). */
export function settingsFor(scope?: vscode.ConfigurationScope | null): Record<string, unknown> {
  const cfg = api.getConfiguration(SECTION, scope);
  return explicitSettings((key) => cfg.inspect(key));
}

/** The Python extension's selected interpreter, when `ms-python.python` is installed. */
export async function pythonExtensionInterpreter(output: vscode.LogOutputChannel): Promise<string | undefined> {
  const ext = api.getExtension("ms-python.python");
  if (!ext) return undefined;
  try {
    const python = ext.isActive ? ext.exports : await ext.activate();
    const resource = api.workspaceFolders()[0]?.uri;
    const env = python?.environments?.getActiveEnvironmentPath?.(resource);
    return typeof env?.path === "string" ? env.path : undefined;
  } catch (error) {
    output.warn(`the Python extension did not give an interpreter: ${String(error)}`);
    return undefined;
  }
}

export async function serverCommand(output: vscode.LogOutputChannel): Promise<ServerCommand> {
  const cfg = api.getConfiguration(SECTION);
  const path = cfg.get<string>("server.path", "");
  const interpreter = cfg.get<string>("server.interpreter", "");
  const pythonExtension = path || interpreter ? undefined : await pythonExtensionInterpreter(output);
  return resolveServerCommand({ path, interpreter, pythonExtension });
}

export function createClient(cmd: ServerCommand, hooks: ClientHooks): LanguageClient {
  const serverOptions: ServerOptions = {
    command: cmd.command,
    args: cmd.args,
    transport: TransportKind.stdio,
    options: { cwd: api.workspaceFolders()[0]?.uri.fsPath },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: hooks.output,
    traceOutputChannel: hooks.output,
    initializationOptions: initializationOptions(settingsFor()),
    middleware: {
      workspace: {
        // Answer `promptls` ourselves: only what the user set, without the client-only keys.
        configuration: async (params, token, next) => {
          const answers = params.items.some((i) => i.section !== SECTION) ? await next(params, token) : [];
          if (answers instanceof Error) return answers;
          return configurationAnswers(params.items, answers as unknown[], (scopeUri) =>
            settingsFor(scopeUri ? api.parseUri(scopeUri) : null),
          );
        },
      },
      executeCommand: executeCommandMiddleware(hooks),
    },
  };
  return new LanguageClient(SECTION, "promptls", serverOptions, clientOptions);
}

/** Starts a client; on failure, tells the user what to set and offers to open the settings. */
export async function startClient(cmd: ServerCommand, hooks: ClientHooks): Promise<LanguageClient | undefined> {
  hooks.output.info(`starting the server: ${[cmd.command, ...cmd.args].join(" ")} (from ${cmd.source})`);
  const client = createClient(cmd, hooks);
  const started = Date.now();
  try {
    await client.start();
    hooks.output.info(`server started in ${Date.now() - started} ms`);
    return client;
  } catch (error) {
    const message = startFailureMessage(cmd, error);
    hooks.output.error(message);
    void client.dispose().catch(() => undefined);
    void api.showErrorMessage(message, "Open Settings", "Show Output").then((choice) => {
      if (choice === "Open Settings") void api.executeCommand("workbench.action.openSettings", "promptls.server");
      if (choice === "Show Output") hooks.output.show();
    });
    return undefined;
  }
}

/** `promptls.assemble` of a document through the running client. */
export async function assemble(client: LanguageClient | undefined, uri: string): Promise<Assembled | undefined> {
  if (!client || !client.isRunning()) return undefined;
  return (await client.sendRequest(ExecuteCommandRequest.type, { command: ASSEMBLE_COMMAND, arguments: [uri] })) as Assembled;
}

/** `promptls.assembledHtml`: the assembled view's page for a document (server/htmlview.py), or
 * for one record (1-based) of a dataset; the server's default is the first. */
export async function assembledHtml(
  client: Pick<LanguageClient, "isRunning" | "sendRequest"> | undefined,
  uri: string,
  nonce: string,
  record?: number,
): Promise<string | undefined> {
  if (!client || !client.isRunning()) return undefined;
  const options = record === undefined ? { nonce } : { nonce, record };
  const answer = (await client.sendRequest(ExecuteCommandRequest.type, {
    command: ASSEMBLED_HTML_COMMAND,
    arguments: [uri, options],
  })) as { html?: unknown } | null;
  return typeof answer?.html === "string" ? answer.html : undefined;
}
