#!/usr/bin/env bash
# Fails when the committed gen/ (and the client package's packages/client/src/gen) differs from what `npm run generate` produces now
# (edited protos, bumped generator pins, or hand edits to generated files).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/generate.sh

stale=0
if ! git diff --exit-code --stat -- gen packages/client/src/gen; then
  stale=1
fi
untracked="$(git ls-files --others --exclude-standard -- gen packages/client/src/gen)"
if [ -n "$untracked" ]; then
  echo "untracked generated files:" >&2
  echo "$untracked" >&2
  stale=1
fi
if [ "$stale" -ne 0 ]; then
  echo "generated code is stale: run npm run generate" >&2
  exit 1
fi
echo "verify-generated: gen/ is up to date" >&2
