#!/usr/bin/env bash
# The whole askgate test suite. Installs what the tests need and a fresh machine lacks
# (redis-server and redis-cli, for the Redis backend's tests), then runs every test of
# the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "==> installing redis-server (Debian package) for the Redis backend's tests"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is missing and apt-get is not available: install Redis 7 and retry" >&2
    exit 1
  fi
fi
# The tests start their own redis-server processes on free ports; a system service the
# package may have started is not used.

exec cargo test --workspace --locked "$@"
