// A stand-in for the `vscode` module so the extension's modules load under `node --test`.
// Import this first in every test file.
import Module from "node:module";

export const registered = new Map<string, (...args: unknown[]) => unknown>();
export const statusItems: Array<Record<string, unknown>> = [];

class EventEmitter<T> {
  private listeners: Array<(e: T) => void> = [];
  event = (l: (e: T) => void) => {
    this.listeners.push(l);
    return { dispose: () => undefined };
  };
  fire(e: T): void {
    for (const l of this.listeners) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

class ThemeColor {
  constructor(readonly id: string) {}
}

const disposable = { dispose: () => undefined };
const event = () => disposable;

function parse(value: string) {
  const m = /^([a-z][a-z0-9+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?/i.exec(value);
  return {
    scheme: m?.[1] ?? "",
    authority: m?.[2] ?? "",
    path: m?.[3] ?? "",
    query: m?.[4] ?? "",
    toString: () => value,
  };
}

export const vscode = {
  version: "1.100.3",
  EventEmitter,
  ThemeColor,
  Disposable: class {
    static from() {
      return disposable;
    }
    constructor(private readonly f?: () => void) {}
    dispose() {
      this.f?.();
    }
  },
  StatusBarAlignment: { Left: 1, Right: 2 },
  ViewColumn: { Beside: -2 },
  ProgressLocation: { Window: 10 },
  Uri: { parse, file: (p: string) => parse(`file://${p}`) },
  commands: {
    registerCommand: (id: string, run: (...args: unknown[]) => unknown) => {
      registered.set(id, run);
      return { dispose: () => registered.delete(id) };
    },
    executeCommand: async () => undefined,
  },
  window: {
    createStatusBarItem: () => {
      const item: Record<string, unknown> = { show: () => (item.visible = true), hide: () => (item.visible = false), dispose: () => undefined };
      statusItems.push(item);
      return item;
    },
    createOutputChannel: () => ({ info() {}, warn() {}, error() {}, show() {}, dispose() {} }),
    onDidChangeActiveTextEditor: event,
    showErrorMessage: async () => undefined,
    showInformationMessage: async () => undefined,
    activeTextEditor: undefined,
  },
  workspace: {
    getConfiguration: () => ({ get: (_k: string, d: unknown) => d, inspect: () => undefined }),
    onDidChangeConfiguration: event,
    onDidChangeTextDocument: event,
    onDidOpenTextDocument: event,
    registerTextDocumentContentProvider: () => disposable,
    textDocuments: [],
    workspaceFolders: undefined,
  },
  languages: { match: () => 0 },
  extensions: { getExtension: () => undefined },
};

// vscode-languageclient subclasses vscode classes at load time: any other name is an empty class.
const others = new Map<string | symbol, unknown>();
const stub = new Proxy(vscode as Record<string | symbol, unknown>, {
  get(target, key) {
    if (key in target) return target[key];
    if (!others.has(key)) others.set(key, class {});
    return others.get(key);
  },
});

const original = (Module as any)._load;
(Module as any)._load = function (request: string, ...rest: unknown[]) {
  if (request === "vscode") return stub;
  return original.call(this, request, ...rest);
};
