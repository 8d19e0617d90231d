#!/usr/bin/env bash
# Installs what the interop tests need, idempotently, into .tools/ (gitignored):
#   - .tools/venv: grpcio, protobuf, pytest (pinned), the generated package gen/python
#     (editable, so a later `npm run generate` needs no reinstall) and the Python worker
#     library clients/python (editable; both share the `worq` namespace package); and mypy
#     with the typeshed stubs types-grpcio and types-protobuf, which type-check
#     clients/python/src/worq (config in clients/python/pyproject.toml); and Faktory's Python
#     clients `faktory` and `pyfaktory` (pinned), which the Faktory port's interop tests run;
#     and opentelemetry-api and -sdk (pinned), for the library's tracing test;
#   - .tools/bin/grpcurl;
#   - the Go modules of test/interop/go, and a warm build cache for `go run .` there;
#   - the Go modules of test/faktory/go-client (github.com/contribsys/faktory's client), built;
#   - the Go worker library's conformance worker and the Go examples, into .tools/bin;
#   - test/faktory/rust-client (crates.io's faktory client), built into .tools/cargo-target
#     with cargo (from PATH or ~/.cargo/bin; Debian's cargo is installed when there is none).
# Pins live in scripts/tools.sh. Called by CI (.ci/run) and by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools.sh

ensure_venv "grpcio==$GRPCIO_VERSION" "protobuf==$PROTOBUF_PY_VERSION" "pytest==$PYTEST_VERSION" \
  "mypy==$MYPY_VERSION" "types-grpcio==$TYPES_GRPCIO_VERSION" "types-protobuf==$TYPES_PROTOBUF_VERSION" \
  "faktory==$FAKTORY_PY_VERSION" "pyfaktory==$PYFAKTORY_VERSION" \
  "opentelemetry-api==$OTEL_PY_VERSION" "opentelemetry-sdk==$OTEL_PY_VERSION"

# Reinstall only when `worq.v1` does not already resolve to this checkout's gen/python.
want="$PWD/gen/python/src/worq/v1/__init__.py"
have="$(cd / && "$VENV_PY" -c 'import worq.v1; print(worq.v1.__file__)' 2>/dev/null || true)"
if [ "$have" != "$want" ]; then
  log "pip installing gen/python (worq-proto, editable) into .tools/venv"
  "$VENV_PY" -m pip install --disable-pip-version-check -q --no-deps -e ./gen/python
fi

# Same for the worker library (worq, editable): its tests and conformance worker use the venv.
want="$PWD/clients/python/src/worq/client.py"
have="$(cd / && "$VENV_PY" -c 'import worq.client; print(worq.client.__file__)' 2>/dev/null || true)"
if [ "$have" != "$want" ]; then
  log "pip installing clients/python (worq, editable) into .tools/venv"
  "$VENV_PY" -m pip install --disable-pip-version-check -q --no-deps -e ./clients/python
fi

ensure_go_tool grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl "$GRPCURL_VERSION"

log "downloading Go modules of test/interop/go and building it"
(cd test/interop/go && go mod download && go build -o /dev/null .)

log "downloading Go modules of test/faktory/go-client (Faktory's own Go client) and building it"
(cd test/faktory/go-client && go mod download && go build -o "$TOOLS_BIN/faktory-go-client" .)

log "building the Go worker library, its conformance worker and the Go examples"
(cd clients/go && go mod download && go build ./... && go build -o "$TOOLS_BIN/go-conformance-worker" ./cmd/conformance-worker)
(cd examples/go && go mod download \
  && go build -o "$TOOLS_BIN/worq-example-go-worker" ./worker \
  && go build -o "$TOOLS_BIN/worq-example-go-producer" ./producer)

cargo_bin="$(command -v cargo || true)"
if [ -z "$cargo_bin" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then cargo_bin="$HOME/.cargo/bin/cargo"; fi
if [ -z "$cargo_bin" ]; then
  [ "$(id -u)" = 0 ] || { log "no cargo on PATH or in ~/.cargo/bin: install Rust (rustup) or Debian's cargo"; exit 1; }
  log "no cargo: installing Debian's cargo"
  apt-get update -qq && apt-get install -y -qq cargo
  cargo_bin="$(command -v cargo)"
fi
log "building test/faktory/rust-client (crates.io faktory) into .tools/cargo-target with $("$cargo_bin" --version)"
(cd test/faktory/rust-client && CARGO_TARGET_DIR="$TOOLS_DIR/cargo-target" "$cargo_bin" build --release --locked --quiet)

log "test tools ready: $VENV_PY (with mypy and Faktory's Python clients), $TOOLS_BIN/grpcurl, $TOOLS_BIN/go-conformance-worker, Go examples, .tools/cargo-target (Rust Faktory client)"
