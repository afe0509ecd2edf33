#!/usr/bin/env bash
# Generates the gRPC code of askgate's proto into src/askgate/v1, copies the tool's
# definition (service/contract/ask_user_question.json, the one every SDK serves) into
# src/askgate, and generates the synchronous client (src/askgate/_sync/client.py) from
# the asyncio one (all committed; the test script regenerates them into a temporary
# folder, OUT=DIR, and checks that they match). Needs grpcio-tools and unasync
# (requirements-dev.txt); PYTHON names the interpreter.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
proto="$here/../../proto"
out="${OUT:-$here/src}"
python=${PYTHON:-python3}
rm -rf "$out/askgate/v1"
mkdir -p "$out/askgate/v1"
"$python" -m grpc_tools.protoc -I "$proto" --python_out="$out" --pyi_out="$out" \
  --grpc_python_out="$out" "$proto/askgate/v1/askgate.proto"
: > "$out/askgate/v1/__init__.py"
cp "$here/../../service/contract/ask_user_question.json" "$out/askgate/ask_user_question.json"
# The synchronous client, generated from the asyncio one.
"$python" "$here/scripts/generate_sync.py" "$out"
