// Build step: copy the server's conversation JSON Schema into the extension (jsonValidation).
import { cpSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ext = join(dirname(fileURLToPath(import.meta.url)), "..");
mkdirSync(join(ext, "schemas"), { recursive: true });
cpSync(join(ext, "..", "assembly", "data", "conversation.schema.json"), join(ext, "schemas", "conversation.schema.json"));
