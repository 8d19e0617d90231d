#!/usr/bin/env bash
# PostgreSQL server binaries (initdb, pg_ctl, postgres) for the PostgreSQL store's tests, which
# start their own throwaway cluster (test/support/postgres.ts). Idempotent: installs the
# Debian package only when no initdb is found. Prints the version found.
set -euo pipefail

find_initdb() {
  command -v initdb 2>/dev/null && return 0
  ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1
}

if [ -z "$(find_initdb)" ]; then
  echo "initdb not found: installing the postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  # Debian's package starts a cluster of its own; the tests do not use it.
  if command -v pg_lsclusters >/dev/null; then
    pg_lsclusters -h | while read -r version name _; do pg_ctlcluster "$version" "$name" stop 2>/dev/null || true; done
  fi
fi

initdb="$(find_initdb)"
if [ -z "$initdb" ]; then
  echo "PostgreSQL install failed: no initdb" >&2
  exit 1
fi
"$initdb" --version
