import type { Assembled, Budget } from "../lspExt";

/** A small §7 object: one system message, one user message. */
export function sample(budget: Partial<Budget>): Assembled {
  return {
    file: "examples/tiny.conv.json",
    encoding: "cl100k_base",
    encoding_requested: "o200k_base",
    settings: { provider: "openai", model: "gpt-4o" },
    budget: {
      max_input_tokens: 128000,
      safety_margin: 0.05,
      available_tokens: 121600,
      tools: 0,
      system: 10,
      custom_agent: 0,
      project_files: 0,
      reminder: 0,
      history_budget: 120000,
      used: 15,
      reserved_tokens: 10,
      ...budget,
    },
    segments: [
      { name: "system", tokens: 10, messages: ["$system"] },
      { name: "history", tokens: 0, messages: [] },
      { name: "custom_agent", tokens: 0, messages: [] },
      { name: "project_files", tokens: 0, messages: [] },
      { name: "forgotten_files", tokens: 0, messages: [] },
      { name: "last_user", tokens: 5, messages: ["m1"] },
      { name: "this_turn", tokens: 0, messages: [] },
      { name: "reminder", tokens: 0, messages: [] },
    ],
    layout: [
      { id: "$system", segment: "system", tokens: 10, cache: true },
      { id: "m1", segment: "last_user", tokens: 5, cache: false },
    ],
    messages: [
      { role: "system", content: "You are helpful.\n```\ncode\n```" },
      { role: "user", content: [{ type: "text", text: "Hi" }] },
    ],
    compression: { triggered: false },
    diagnostics: [],
  };
}
