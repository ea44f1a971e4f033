#!/usr/bin/env bash
# Build, test and package the VS Code extension from a clean checkout (Node 20, npm registry).
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
npm run build
npm test
npm run package
vsix="promptls-$(node -p 'require("./package.json").version').vsix"
echo "$vsix: $(stat -c %s "$vsix") bytes"
