#!/usr/bin/env bash
# Fails when the protos break a client built against the last release: buf breaking (buf.yaml's
# FILE rules) against the newest image in proto/baseline/. A fresh clone has no release tags, so the
# committed image is the contract of record; a release adds its own (scripts/release-baseline.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

baseline="$(ls proto/baseline/v*.binpb 2>/dev/null | sort -V | tail -n 1)"
if [ -z "$baseline" ]; then
  echo "check-breaking: no baseline image in proto/baseline/" >&2
  exit 1
fi
npx --no-install buf breaking --against "$baseline"
echo "check-breaking: proto/ keeps the contract of $baseline" >&2
