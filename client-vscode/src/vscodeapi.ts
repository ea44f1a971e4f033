// Thin wrappers over `vscode`: every other module calls the editor through these, so unit
// tests can stub this module (or the `vscode` module) without an extension host.
import * as vscode from "vscode";

export type Disposable = vscode.Disposable;

export function registerCommand(id: string, run: (...args: any[]) => unknown): vscode.Disposable {
  return vscode.commands.registerCommand(id, run);
}

export function executeCommand<T>(id: string, ...args: unknown[]): Thenable<T> {
  return vscode.commands.executeCommand<T>(id, ...args);
}

export function getConfiguration(section: string, scope?: vscode.ConfigurationScope | null): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(section, scope);
}

export function onDidChangeConfiguration(listener: (e: vscode.ConfigurationChangeEvent) => unknown): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration(listener);
}

export function onDidChangeTextDocument(listener: (e: vscode.TextDocumentChangeEvent) => unknown): vscode.Disposable {
  return vscode.workspace.onDidChangeTextDocument(listener);
}

export function onDidOpenTextDocument(listener: (d: vscode.TextDocument) => unknown): vscode.Disposable {
  return vscode.workspace.onDidOpenTextDocument(listener);
}

export function onDidChangeActiveTextEditor(listener: (e: vscode.TextEditor | undefined) => unknown): vscode.Disposable {
  return vscode.window.onDidChangeActiveTextEditor(listener);
}

export function activeTextEditor(): vscode.TextEditor | undefined {
  return vscode.window.activeTextEditor;
}

export function textDocuments(): readonly vscode.TextDocument[] {
  return vscode.workspace.textDocuments;
}

export function matchesSelector(selector: vscode.DocumentSelector, doc: vscode.TextDocument): boolean {
  return vscode.languages.match(selector, doc) > 0;
}

export function createOutputChannel(name: string): vscode.LogOutputChannel {
  return vscode.window.createOutputChannel(name, { log: true });
}

export function createStatusBarItem(id: string, priority: number): vscode.StatusBarItem {
  return vscode.window.createStatusBarItem(id, vscode.StatusBarAlignment.Right, priority);
}

export function themeColor(id: string): vscode.ThemeColor {
  return new vscode.ThemeColor(id);
}

export function showErrorMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showErrorMessage(message, ...items);
}

export function showInformationMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showInformationMessage(message, ...items);
}

export function withProgress<T>(title: string, task: () => Thenable<T>): Thenable<T> {
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title }, task);
}

export function registerTextDocumentContentProvider(
  scheme: string,
  provider: vscode.TextDocumentContentProvider,
): vscode.Disposable {
  return vscode.workspace.registerTextDocumentContentProvider(scheme, provider);
}

export function newEventEmitter<T>(): vscode.EventEmitter<T> {
  return new vscode.EventEmitter<T>();
}

export function parseUri(value: string): vscode.Uri {
  return vscode.Uri.parse(value, true);
}

export async function showDocument(uri: vscode.Uri): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: false, preserveFocus: true });
}

/** An untitled Markdown document with ``content``, shown in a Markdown preview beside. */
export async function showMarkdown(content: string): Promise<void> {
  const doc = await vscode.workspace.openTextDocument({ language: "markdown", content });
  await vscode.commands.executeCommand("markdown.showPreviewToSide", doc.uri);
}

export function openTextDocument(uri: vscode.Uri): Thenable<vscode.TextDocument> {
  return vscode.workspace.openTextDocument(uri);
}

export function findFiles(include: string, exclude: string, max: number): Thenable<vscode.Uri[]> {
  return vscode.workspace.findFiles(include, exclude, max);
}

export function getExtension(id: string): vscode.Extension<any> | undefined {
  return vscode.extensions.getExtension(id);
}

export function workspaceFolders(): readonly vscode.WorkspaceFolder[] {
  return vscode.workspace.workspaceFolders ?? [];
}

export function createWebviewPanel(viewType: string, title: string): vscode.WebviewPanel {
  return vscode.window.createWebviewPanel(
    viewType,
    title,
    { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
    { enableScripts: true, enableFindWidget: true, localResourceRoots: [] },
  );
}

/** Opens `source` where it is visible (else in the first column) with the cursor on line:column (code points). */
export async function revealInDocument(source: string, line: number, codePointColumn: number): Promise<void> {
  const uri = parseUri(source);
  const doc = await vscode.workspace.openTextDocument(uri);
  const visible = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
  const safeLine = Math.max(0, Math.min(line, doc.lineCount - 1));
  const text = doc.lineAt(safeLine).text;
  // The server counts code points; VS Code positions count UTF-16 units.
  const character = Array.from(text).slice(0, Math.max(0, codePointColumn)).join("").length;
  const pos = new vscode.Position(safeLine, character);
  const editor = await vscode.window.showTextDocument(doc, {
    viewColumn: visible?.viewColumn ?? vscode.ViewColumn.One,
    preserveFocus: false,
    selection: new vscode.Range(pos, pos),
  });
  editor.revealRange(new vscode.Range(pos, pos), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
}
