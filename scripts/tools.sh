# Pinned versions of every code generator and test tool, sourced by generate.sh and
# install-test-tools.sh. Changing a generator pin changes generated code: bump it here,
# run `npm run generate`, and commit the result together with gen/.

# Go generators (installed with `go install` into .tools/bin).
PROTOC_GEN_GO_VERSION=v1.36.11
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

# Python generator: grpcio-tools bundles protoc (libprotoc 35.1) with the python, pyi and
# grpc_python generators. Its gencode needs protobuf >= 7.35.1 and grpcio >= 1.85.1 at run
# time, which gen/python/pyproject.toml declares.
GRPCIO_TOOLS_VERSION=1.85.1
GRPCIO_VERSION=1.85.1
PROTOBUF_PY_VERSION=7.36.2

# Test tools.
PYTEST_VERSION=9.2.0
# OpenTelemetry for the Python library's tracing test (in-memory span exporter).
OTEL_PY_VERSION=1.45.2
GRPCURL_VERSION=v1.9.3
# Faktory's Python clients, for the Faktory port's interop tests (test/faktory/clients-python.test.ts).
FAKTORY_PY_VERSION=1.0.0
PYFAKTORY_VERSION=0.2.13
# The Python client's type checker, and the stubs of its dependencies: they match the
# runtime pins above (grpcio 1.85, protobuf 7.3x), so bump them together.
MYPY_VERSION=2.4.1
TYPES_GRPCIO_VERSION=1.85.0.20261028
TYPES_PROTOBUF_VERSION=7.35.1.20260906

# --- helpers (sourced; expect the repo root as the working directory) -----------------

TOOLS_DIR="$PWD/.tools"
TOOLS_BIN="$TOOLS_DIR/bin"
VENV="$TOOLS_DIR/venv"
VENV_PY="$VENV/bin/python"

log() { echo "[tools] $*" >&2; }

# ensure_go_tool BINARY PACKAGE VERSION: `go install PACKAGE@VERSION` into .tools/bin unless
# the binary there was already built from that version (read back with `go version -m`).
ensure_go_tool() {
  local bin="$1" pkg="$2" version="$3" have=""
  if [ -x "$TOOLS_BIN/$bin" ]; then
    have="$(go version -m "$TOOLS_BIN/$bin" 2>/dev/null | awk '$1 == "mod" { print $3; exit }')"
  fi
  if [ "$have" = "$version" ]; then
    return 0
  fi
  log "installing $pkg@$version into .tools/bin${have:+ (had $have)}"
  mkdir -p "$TOOLS_BIN"
  GOBIN="$TOOLS_BIN" go install "$pkg@$version"
}

# ensure_venv NAME==VERSION...: create .tools/venv if missing and pip-install the pinned
# requirements that are not already installed at exactly that version.
ensure_venv() {
  if [ ! -x "$VENV_PY" ]; then
    log "creating Python venv in .tools/venv"
    python3 -m venv "$VENV"
  fi
  local missing
  missing="$("$VENV_PY" - "$@" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for req in sys.argv[1:]:
    name, _, want = req.partition("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have != want:
        print(req)
PY
)"
  if [ -n "$missing" ]; then
    log "pip installing into .tools/venv: $(echo $missing)"
    # shellcheck disable=SC2086  # one requirement per word
    "$VENV_PY" -m pip install --disable-pip-version-check -q $missing
  fi
}
