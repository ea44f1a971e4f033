// Mirrors server/lsp/ext.py, nothing else: custom command names and the shape of their answers.

/** workspace/executeCommand, arguments [document URI] or [document URI, record]: the §7 JSON of
 * that document, or of that record (1-based, default 1) of a dataset. */
export const ASSEMBLE_COMMAND = "promptls.assemble";
/** workspace/executeCommand (the code lens, [uri] or [uri, record]): same answer; the client opens
 * the assembled view of that record. */
export const SHOW_ASSEMBLED_COMMAND = "promptls.showAssembled";

/** workspace/executeCommand, arguments [document URI, {nonce, record?}]: {html}, the assembled
 * view's page (of that record of a dataset, default 1). */
export const ASSEMBLED_HTML_COMMAND = "promptls.assembledHtml";

/** workspace/executeCommand, arguments [template URI]: {@link TemplateDiff}, the template's
 * conversations and `promptls diff HEAD -- TEMPLATE` as Markdown. */
export const TEMPLATE_DIFF_COMMAND = "promptls.templateDiff";
/** workspace/executeCommand (the template's code lens): same answer; the client shows the Markdown. */
export const SHOW_TEMPLATE_DIFF_COMMAND = "promptls.showTemplateDiff";

export const COMMANDS = [
  ASSEMBLE_COMMAND,
  SHOW_ASSEMBLED_COMMAND,
  ASSEMBLED_HTML_COMMAND,
  TEMPLATE_DIFF_COMMAND,
  SHOW_TEMPLATE_DIFF_COMMAND,
] as const;

/** The answer of `promptls.templateDiff` (delta null outside git). */
export interface TemplateDiff {
  template: string;
  title: string;
  conversations: string[];
  delta: number | null;
  markdown: string;
}

/** `promptls assemble --format json` (SPEC §7), the parts the client reads. */
export interface Budget {
  max_input_tokens: number;
  safety_margin: number;
  available_tokens: number;
  tools: number;
  system: number;
  custom_agent: number;
  project_files: number;
  reminder: number;
  history_budget: number;
  used: number;
  reserved_tokens: number;
}

export interface Segment {
  name: string;
  tokens: number;
  messages: string[];
}

export interface LayoutEntry {
  id: string;
  segment: string;
  tokens: number;
  cache?: boolean;
}

export interface Position7 {
  line: number;
  column: number;
}

export interface Diagnostic7 {
  file?: string;
  code: string;
  severity: "error" | "warning" | "info" | "hint";
  message: string;
  range?: { start: Position7; end: Position7 };
}

export interface Compression {
  triggered: boolean;
  threshold?: number;
  history_tokens?: number;
  [key: string]: unknown;
}

export interface Assembled {
  file: string;
  settings?: Record<string, unknown>;
  encoding?: string;
  encoding_requested?: string;
  budget: Budget;
  segments: Segment[];
  layout: LayoutEntry[];
  messages: Array<Record<string, unknown>>;
  dropped?: string[];
  orphans_dropped?: string[];
  forgotten_files?: Array<Record<string, unknown>>;
  compression?: Compression | null;
  cache_prefix_length?: number;
  diagnostics?: Diagnostic7[];
}
