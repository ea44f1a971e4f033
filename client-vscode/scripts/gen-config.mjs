#!/usr/bin/env node
// Regenerates the server-settings part of package.json `contributes.configuration` from
// `assembly.settings_model.SettingsModel.model_json_schema()` (its fields: `assembly/settings_table.py`) (STYLE rule 14). Usage: node scripts/gen-config.mjs [--check]
//   PROMPTLS_PYTHON: the interpreter that can import `assembly` (default: ../.venv/bin/python).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const ext = join(here, "..");
const repo = join(ext, "..");
const check = process.argv.includes("--check");

function python() {
  if (process.env.PROMPTLS_PYTHON) return process.env.PROMPTLS_PYTHON;
  const venv = join(repo, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/** One `contributes.configuration` entry per server setting, from the pydantic schema. */
export function configEntries(schema) {
  const out = {};
  for (const [key, prop] of Object.entries(schema.properties)) {
    const entry = {};
    const { title, anyOf, ...rest } = prop;
    if (anyOf) {
      const simple = anyOf.every((s) => Object.keys(s).every((k) => k === "type"));
      if (simple) entry.type = anyOf.map((s) => s.type);
      else entry.anyOf = anyOf;
    }
    Object.assign(entry, rest);
    entry.scope = "resource";
    out[`promptls.${key}`] = entry;
  }
  return out;
}

const CLIENT = {
  "promptls.server.path": {
    type: "string",
    default: "",
    scope: "machine-overridable",
    description:
      "Path of a `promptls` executable; the server is started as `<path> serve`. Wins over `promptls.server.interpreter`.",
  },
  "promptls.server.interpreter": {
    type: "string",
    default: "",
    scope: "machine-overridable",
    description:
      "Python interpreter that has promptls installed; the server is started as `<python> -m server`. Default: the Python extension's selected interpreter, else `promptls` on PATH.",
  },
  "promptls.trace.server": {
    type: "string",
    enum: ["off", "messages", "verbose"],
    default: "off",
    scope: "window",
    description: "Trace the LSP traffic between VS Code and the promptls server in the output channel.",
  },
};

const schema = JSON.parse(
  execFileSync(
    python(),
    ["-c", "import json; from assembly.settings_model import SettingsModel; print(json.dumps(SettingsModel.model_json_schema()))"],
    { cwd: repo, encoding: "utf8" },
  ),
);
const pkgPath = join(ext, "package.json");
const pkg = JSON.parse(readFileSync(pkgPath, "utf8"));
const properties = { ...CLIENT, ...configEntries(schema) };
const before = JSON.stringify(pkg.contributes.configuration.properties);
if (check) {
  if (before !== JSON.stringify(properties)) {
    console.error("package.json contributes.configuration is stale: run `node scripts/gen-config.mjs`");
    process.exit(1);
  }
} else {
  pkg.contributes.configuration.properties = properties;
  writeFileSync(pkgPath, JSON.stringify(pkg, null, 2) + "\n");
}
