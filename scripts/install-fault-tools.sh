#!/usr/bin/env bash
# Installs what the fault tests need (test/fault), idempotently, from Debian:
#   - fuse3 + python3-fusepy: the power-loss / disk-trouble filesystem (test/fault/support/lazyfs.py);
#   - strace: the fsync-before-reply audit.
# Uses the system python3 (/usr/bin/python3), where python3-fusepy installs. Called by CI (.ci/run).
set -euo pipefail
missing=()
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
/usr/bin/python3 -c 'import fusepy' >/dev/null 2>&1 || missing+=(python3-fusepy)
command -v strace >/dev/null 2>&1 || missing+=(strace)
if [ "${#missing[@]}" -eq 0 ]; then
  echo "fault tools present: fuse3, python3-fusepy, strace"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
echo "apt-get installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
