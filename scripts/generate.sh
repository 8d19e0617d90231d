#!/usr/bin/env bash
# Regenerates the TS code (packages/client/src/gen), gen/go and gen/python from proto/ with buf and local, pinned plugins.
# Idempotent: installs missing or outdated generators into .tools/ first, and the output
# depends only on proto/ and the pins in scripts/tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools.sh

if [ ! -x node_modules/.bin/buf ] || [ ! -x node_modules/.bin/protoc-gen-es ]; then
  echo "generate: node_modules is missing buf or protoc-gen-es: run npm ci first" >&2
  exit 1
fi

ensure_go_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
ensure_go_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"
ensure_venv "grpcio-tools==$GRPCIO_TOOLS_VERSION" "grpcio==$GRPCIO_VERSION" "protobuf==$PROTOBUF_PY_VERSION"

# .tools/bin first so that buf finds the pinned Go plugins, not whatever is on the PATH.
PATH="$TOOLS_BIN:$PATH" npx --no-install buf generate
# Vendored grpc.health.v1, TS descriptors only: gRPC reflection serves them so grpcurl can call Health.
npx --no-install buf generate --template buf.gen.third-party.yaml
# A descriptor set with source info (comments) for gRPC reflection, so that
# `grpcurl describe` shows each RPC's and field's contract comment.
mkdir -p gen/descriptors
npx --no-install buf build -o gen/descriptors/worq.binpb
echo "generate: wrote packages/client/src/gen, gen/go, gen/python, gen/third_party/ts, gen/descriptors" >&2
