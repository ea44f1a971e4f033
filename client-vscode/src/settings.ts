// Reads and resolves settings: the server command line and the `promptls` settings sent as
// initializationOptions `{promptls: {...}}` and as the answer to workspace/configuration.
import pkg from "../package.json";

export const SECTION = "promptls";
const CLIENT_ONLY = ["server.", "trace."];

/** Setting names (without `promptls.`) the server understands: generated from its schema. */
export const SERVER_SETTING_KEYS: readonly string[] = Object.keys(pkg.contributes.configuration.properties)
  .map((k) => k.slice(SECTION.length + 1))
  .filter((k) => !CLIENT_ONLY.some((p) => k.startsWith(p)));

export type CommandSource = "promptls.server.path" | "promptls.server.interpreter" | "python extension" | "PATH";

export interface ServerCommand {
  command: string;
  args: string[];
  source: CommandSource;
}

export interface CommandInputs {
  /** `promptls.server.path`: a `promptls` executable. */
  path?: string;
  /** `promptls.server.interpreter`: a Python with promptls installed. */
  interpreter?: string;
  /** The Python extension's selected interpreter, when that extension is installed. */
  pythonExtension?: string;
}

/** Which command starts the server: path > interpreter > Python extension > `promptls` on PATH. */
export function resolveServerCommand(inputs: CommandInputs): ServerCommand {
  const path = inputs.path?.trim();
  if (path) return { command: path, args: ["serve"], source: "promptls.server.path" };
  const interpreter = inputs.interpreter?.trim();
  if (interpreter) return { command: interpreter, args: ["-m", "server"], source: "promptls.server.interpreter" };
  const python = inputs.pythonExtension?.trim();
  if (python) return { command: python, args: ["-m", "server"], source: "python extension" };
  return { command: "promptls", args: ["serve"], source: "PATH" };
}

export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * Only the server settings a user actually set (folder > workspace > user): defaults are left
 * out, so a `promptls.toml` or `[tool.promptls]` still applies (editor settings win over them).
 */
export function explicitSettings(inspect: (key: string) => Inspected | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SERVER_SETTING_KEYS) {
    const i = inspect(key);
    if (!i) continue;
    const value = i.workspaceFolderValue ?? i.workspaceValue ?? i.globalValue;
    if (value !== undefined) out[key] = value;
  }
  return out;
}

export function initializationOptions(settings: Record<string, unknown>): { promptls: Record<string, unknown> } {
  return { [SECTION]: settings } as { promptls: Record<string, unknown> };
}

/** A settings change that needs a server restart (the command line) rather than a resync. */
export function needsRestart(affects: (section: string) => boolean): boolean {
  return affects("promptls.server");
}

/** The message shown when the server does not start, and what to do about it. */
export function startFailureMessage(cmd: ServerCommand, error: unknown): string {
  const line = [cmd.command, ...cmd.args].join(" ");
  const why = error instanceof Error ? error.message : String(error);
  const fix =
    cmd.source === "PATH" || cmd.source === "python extension"
      ? "Set promptls.server.interpreter to a Python that has promptls installed (pip install promptls), or promptls.server.path to the promptls executable."
      : `Check ${cmd.source}: it must point to ${cmd.source === "promptls.server.path" ? "the promptls executable" : "a Python that has promptls installed"}.`;
  return `promptls: the language server did not start (\`${line}\`, from ${cmd.source}): ${why}. ${fix}`;
}

/** workspace/configuration answers: ours for `promptls` items, the default handler's for the rest. */
export function configurationAnswers(
  items: ReadonlyArray<{ section?: string; scopeUri?: string }>,
  others: readonly unknown[],
  settingsOf: (scopeUri?: string) => Record<string, unknown>,
): unknown[] {
  return items.map((item, i) => (item.section === SECTION ? settingsOf(item.scopeUri) : others[i]));
}
