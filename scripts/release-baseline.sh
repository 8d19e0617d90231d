#!/usr/bin/env bash
# Part of a release: writes the protos as they are now to proto/baseline/v<version>.binpb (the
# version in package.json), the image scripts/check-breaking.sh compares every later change with.
# Commit the image with the release.
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(node -p 'require("./package.json").version')"
out="proto/baseline/v${version}.binpb"
if [ -e "$out" ] && [ "${1:-}" != "--force" ]; then
  echo "release-baseline: $out exists (a released contract is not rewritten; --force to replace it)" >&2
  exit 1
fi
npx --no-install buf build -o "$out"
echo "release-baseline: wrote $out" >&2
