#!/usr/bin/env bash
# Installs Debian's Chromium (/usr/bin/chromium) for the dashboard's browser tests
# (test/dashboard, driven by playwright-core), idempotently: nothing happens when it is
# already there. Uses apt-get (as root, or through sudo). Called by CI (.ci/run) and by hand.
set -euo pipefail

if [ -x /usr/bin/chromium ] && /usr/bin/chromium --version >/dev/null 2>&1; then
  echo "install-browser: $(/usr/bin/chromium --version 2>/dev/null | head -1) already installed" >&2
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
echo "install-browser: apt-get install chromium" >&2
if ! "${as_root[@]}" apt-get install -y --no-install-recommends chromium; then
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends chromium
fi
/usr/bin/chromium --version
