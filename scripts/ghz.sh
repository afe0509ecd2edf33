#!/usr/bin/env bash
# ghz against askgate, in one run: Ask round trips (each worker in a session of its own,
# every batch answered by `askgate bot --all-sessions`), then grpc.health.v1.Health/Check
# with the same settings as the baseline. Prints both summaries and their ratio, keeps
# the JSON reports, and fails when any Ask call did not end OK.
#
#   scripts/ghz.sh [-c CONCURRENCY] [-n ASKS] [-o DIR] [-b ASKGATE]
#   (defaults: 16, 5000, target/ghz, a release build made here)
#
# Installs ghz with `go install` when it is missing. The server runs with the per-tenant
# Ask rate lifted (a load test asks faster than the default 1000/s).
set -euo pipefail
cd "$(dirname "$0")/.."

concurrency=16
total=5000
out=target/ghz
askgate=""
while getopts "c:n:o:b:" flag; do
  case "$flag" in
    c) concurrency=$OPTARG ;;
    n) total=$OPTARG ;;
    o) out=$OPTARG ;;
    b) askgate=$OPTARG ;;
    *) echo "usage: $0 [-c CONCURRENCY] [-n ASKS] [-o DIR] [-b ASKGATE]" >&2; exit 64 ;;
  esac
done
# ghz sends nothing when -n is below -c.
if [ "$total" -lt "$concurrency" ]; then
  echo "-n ($total) must be at least -c ($concurrency)" >&2
  exit 64
fi

export PATH="$PATH:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
if ! command -v ghz >/dev/null 2>&1; then
  echo "==> installing ghz (go install)"
  go install github.com/bojand/ghz/cmd/ghz@v0.120.0  # @latest resolves to an old v0.93.0
fi

if [ -z "$askgate" ]; then
  cargo build --release --locked -q --bin askgate
  askgate=target/release/askgate
fi
mkdir -p "$out"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The log exists before the server starts: the loop below may read it before the
# background job has opened it.
: >"$work/serve.log"
"$askgate" serve --listen 127.0.0.1:0 --log info --backend memory \
  --ask-rate 1000000000 --ask-burst 1000000000 2>"$work/serve.log" &
pids+=($!)
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/.*local_addr=\([0-9.:]*\).*/\1/p' "$work/serve.log" | head -1)
  [ -n "$addr" ] && break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "askgate serve did not start:" >&2
  cat "$work/serve.log" >&2
  exit 1
fi

"$askgate" bot --addr "http://$addr" --all-sessions 2>"$work/bot.log" &
pids+=($!)
# The bot is ready once it answers an ask (until then asks fail NO_PROVIDER).
ready=""
for _ in $(seq 100); do
  if "$askgate" ask --addr "http://$addr" --session ghz-ready --question "Ready?" \
    --option yes --timeout 2s >/dev/null 2>&1; then
    ready=yes
    break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "askgate bot did not answer:" >&2
  cat "$work/bot.log" >&2
  exit 1
fi

# -t: ghz's own default (20s) would become each call's deadline; --count-errors: failed
# calls enter the latency figures too, instead of vanishing from them.
common=(--insecure -c "$concurrency" -n "$total" -t 60s --count-errors -O json)
ask='{"session_id":"ghz-{{.WorkerID}}","questions":[{"id":"q","question":"Proceed?","options":[{"label":"yes"},{"label":"no"}]}]}'
echo "==> ghz: $total asks at concurrency $concurrency against $addr, answered by askgate bot"
ghz "${common[@]}" -o "$out/ask.json" --call askgate.v1.UserQuestions/Ask -d "$ask" "$addr"
echo "==> ghz: the same settings against grpc.health.v1.Health/Check"
ghz "${common[@]}" -o "$out/health.json" --call grpc.health.v1.Health/Check -d '{}' "$addr"

python3 - "$out/ask.json" "$out/health.json" <<'EOF'
import json, sys

def load(path):
    with open(path) as f:
        report = json.load(f)
    latency = {p["percentage"]: p["latency"] / 1e6 for p in report.get("latencyDistribution") or []}
    return report, latency

ask, ask_latency = load(sys.argv[1])
health, health_latency = load(sys.argv[2])
for name, report, latency in [("Ask", ask, ask_latency), ("Health/Check", health, health_latency)]:
    print(f"{name:>13}: {report['count']} calls, {report['rps']:.0f}/s, "
          f"p50 {latency.get(50, 0):.2f} ms, p99 {latency.get(99, 0):.2f} ms, "
          f"status {report.get('statusCodeDistribution')}")
p50 = ask_latency.get(50, 0) / max(health_latency.get(50, 0), 1e-9)
print(f"Ask/Health: throughput {ask['rps'] / health['rps']:.2f}x, p50 {p50:.2f}x")
print(f"reports: {sys.argv[1]} {sys.argv[2]}")
codes = ask.get("statusCodeDistribution") or {}
if set(codes) != {"OK"} or codes["OK"] != ask["count"]:
    sys.exit(f"some asks did not end OK: {codes} {ask.get('errorDistribution')}")
EOF
