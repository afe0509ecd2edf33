#!/usr/bin/env bash
# The whole askgate test suite. Installs what the tests need and a fresh machine lacks
# (redis-server and redis-cli, tmux, chromium, toxiproxy, a Python venv with the MCP
# SDK), then runs every test of the workspace (the chaos tests with toxiproxy, Redis
# replicas and Sentinels, in their short form; the webhook tests with a Python receiver that
# verifies signatures with the Standard Webhooks reference library, the Slack tests with
# a fake Slack that checks Block Kit with the official Slack SDK), the MCP tests
# (tests/mcp: the official MCP Python SDK against `askgate mcp`), the A2A tests (tests/a2a:
# the official A2A Python SDK against `askgate serve --a2a on`), the Python SDK's (client/python: its wheel built and
# installed into a venv), the Node SDK's (client/node: its tarball packed and installed
# into a fresh project) and the browser console's tests (client/web: Playwright driving
# Debian's Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need: redis-server and redis-cli (the Redis backend's
# tests), tmux (the answering overlay runs in a real terminal), strace (a slow disk for
# the crash tests), chromium (the console's tests; Playwright never downloads a browser
# of its own).
missing=()
command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || missing+=(redis-server)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# strace: the crash tests make a slow disk with its fault injection (delayed fsyncs).
command -v strace >/dev/null 2>&1 || missing+=(strace)
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)
command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Node.js 20 or newer with npm" >&2; exit 1; }
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> installing ${missing[*]} (Debian packages) for the tests"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "${missing[*]} missing and apt-get is not available: install them and retry" >&2
    exit 1
  fi
fi
# The tests start their own redis-server processes on free ports; a system service the
# package may have started is not used.

# toxiproxy (Shopify's fault-injecting TCP proxy, a Go binary) for the chaos tests
# (tests/integration/chaos): built once with `go install` into Go's bin directory.
if [ -z "${ASKGATE_TOXIPROXY:-}" ]; then
  command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { echo "go is missing: install Go to build toxiproxy for the chaos tests" >&2; exit 1; }
  gobin="$(go env GOBIN)"
  [ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
  export ASKGATE_TOXIPROXY="$gobin/server"
  if [ ! -x "$ASKGATE_TOXIPROXY" ]; then
    echo "==> installing toxiproxy (go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0)"
    go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0
  fi
fi

# A venv at $1 with the packages of the requirements file $2, made once and made again
# when the file changes.
venv_with() {
  local venv=$1 requirements=$2
  if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
  fi
}

# The integration tests' Python helpers (tests/integration/requirements.txt) run in a
# venv of their own (made once, refreshed when its requirements change): the webhook
# receiver verifies signatures with the Standard Webhooks reference library, and the
# fake Slack checks every message and modal with the official Slack SDK's Block Kit
# models (tests/slack/blockkit.py, whose own tests run first).
testvenv=target/test-venv
venv_with "$testvenv" tests/integration/requirements.txt
export ASKGATE_TEST_PYTHON="$PWD/$testvenv/bin/python"
echo "==> the fake Slack's Block Kit checker (tests/slack)"
(cd tests/slack && "$ASKGATE_TEST_PYTHON" -m pytest -q -p no:cacheprovider)

cargo test --workspace --locked "$@"
# The Rust SDK's `opentelemetry` feature (off in the workspace's build): the caller's
# current context is carried, its baggage is not.
echo "==> the Rust SDK with its opentelemetry feature"
cargo test -p askgate-client --features opentelemetry --locked --lib trace

# MCP clients against the binary `cargo test` just built: the official Python SDK, in
# a venv of its own under target/ (made once, refreshed when the requirements change).
echo "==> MCP tests (tests/mcp, the MCP Python SDK)"
venv=target/mcp-venv
venv_with "$venv" tests/mcp/requirements.txt
ASKGATE_BIN="$PWD/target/debug/askgate" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/mcp

# askgate as an A2A agent (`--a2a on`), driven by the official A2A Python SDK (its gRPC
# transport), in a venv of its own under target/.
echo "==> A2A tests (tests/a2a, the A2A Python SDK)"
venv=target/a2a-venv
venv_with "$venv" tests/a2a/requirements.txt
ASKGATE_BIN="$PWD/target/debug/askgate" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/a2a

# The Python SDK (client/python): its generated code must match the proto, its wheel
# must build, and its tests run against the binary `cargo test` just built, with the
# wheel installed into a venv of their own.
echo "==> Python SDK tests (client/python)"
pyvenv=target/python-venv
venv_with "$pyvenv" client/python/requirements-dev.txt
generated=$(mktemp -d)
OUT="$generated" PYTHON="$PWD/$pyvenv/bin/python" client/python/scripts/generate.sh
if ! diff -r client/python/src/askgate/v1 "$generated/askgate/v1" >/dev/null ||
  ! cmp -s client/python/src/askgate/ask_user_question.json "$generated/askgate/ask_user_question.json" ||
  ! cmp -s client/python/src/askgate/_sync/client.py "$generated/askgate/_sync/client.py"; then
  echo "client/python/src/askgate/v1, ask_user_question.json or _sync/client.py differ from their sources: run client/python/scripts/generate.sh" >&2
  rm -rf "$generated"
  exit 1
fi
rm -rf "$generated"
rm -rf target/python-dist
"$pyvenv/bin/python" -m build --no-isolation --outdir target/python-dist client/python >/dev/null
"$pyvenv/bin/pip" install --quiet --force-reinstall --no-deps target/python-dist/askgate-*.whl
(cd client/python && ASKGATE_BIN="$PWD/../../target/debug/askgate" "../../$pyvenv/bin/python" -m pytest -q -p no:cacheprovider tests)

# TypeScript (client/: one npm workspace for the Node SDK and the console, which build
# from the same generated code). The SDK is built and type-checked (test/types.ts
# against the OpenAI and Anthropic SDKs' types), packed, and its tarball installed into a
# fresh project under target/ for the quickstart test; then the SDK's tests and the
# console's run against the binary `cargo test` just built.
echo "==> Node SDK tests (client/node) and console tests (client/web, headless Chromium); screenshots in target/console-screenshots/"
rm -rf target/node-dist target/node-install client/askgate-client-*.tgz
mkdir -p target/node-dist target/node-install
# docs/node.md's build commands (its first sh block), run as written from the
# repository root, with every package's `engines` enforced: they must hold on the
# Node this runs on.
docs_build=$(awk '/^```sh$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' docs/node.md)
(
  export npm_config_engine_strict=true npm_config_audit=false npm_config_fund=false npm_config_loglevel=error
  bash -euo pipefail -c "$docs_build" >/dev/null
)
mv client/askgate-client-*.tgz target/node-dist/
(cd client && npm run check -w @askgate/client --silent)
(
  cd target/node-install
  printf '{"name": "quickstart", "private": true, "type": "module"}\n' >package.json
  npm install --no-audit --no-fund --loglevel=error ../node-dist/askgate-client-*.tgz
)
(cd client/node && ASKGATE_BIN="$PWD/../../target/debug/askgate" ASKGATE_NODE_INSTALL="$PWD/../../target/node-install" npm test)
cd client/web
ASKGATE_BIN="$PWD/../../target/debug/askgate" npm test
