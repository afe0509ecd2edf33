#!/usr/bin/env bash
# Two builds of askgate side by side: release binaries of BASE and of HEAD (the working
# tree when HEAD is not given), measured in alternating runs by the same load generator
# (this checkout's askgate-bench), then each figure's median for both and their ratio.
#
#   scripts/bench-compare.sh [options] BASE [HEAD]
#
#   --pairs N             runs of each build, alternated: base then head, then head
#                         then base, ... (default 3)
#   --asks N              round trips per backend and concurrency (default 10000)
#   --backends LIST       roundtrip backends (default memory,sqlite,redis; a build
#                         without the sqlite engine skips it)
#   --capacity LIST       capacity backends (default memory,sqlite; "none" skips)
#   --pending N           capacity: asks held pending (default 100000, +10000 in one
#                         session, which a new subscriber replays)
#   --action              every roundtrip ask carries an action (both builds)
#   --policies N          HEAD's tenant has a policy set of N asking permits that
#                         judge every ask (askgate-bench roundtrip --policies, spread
#                         over --policy-actions K actions, default 10; 1 puts all of
#                         them on the asked action); both builds ask with an action.
#                         With BASE = HEAD, the difference is what judging costs
#   --out DIR             where the runs' figures and logs go (default
#                         target/bench-compare/runs/<date>)
#   --base-target DIR     cargo target directory for BASE (default
#                         target/bench-compare/build/<commit>; kept, so a second
#                         comparison only builds what changed)
#   --same-profile        build BASE with this checkout's [profile.release] settings
#                         (as CARGO_PROFILE_RELEASE_* variables, in a target directory
#                         of its own): the code compared, not the build settings. By
#                         default each build is what its own Cargo.toml makes
#
# Prints the comparison as a Markdown table (docs/performance.md keeps one) and writes
# it to DIR/compare.md. A git worktree of each commit is kept under
# target/bench-compare/src. Needs redis-server for the redis backend.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

pairs=3
asks=10000
backends=memory,sqlite,redis
capacity=memory,sqlite
pending=100000
out=""
base_target=""
same_profile=0
action=0
policies=0
policy_actions=10
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=$2; shift 2 ;;
    --asks) asks=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --capacity) capacity=$2; shift 2 ;;
    --pending) pending=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --base-target) base_target=$2; shift 2 ;;
    --same-profile) same_profile=1; shift ;;
    --action) action=1; shift ;;
    --policies) policies=$2; action=1; shift 2 ;;
    --policy-actions) policy_actions=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "bench-compare: unknown option $1 (see --help)" >&2; exit 64 ;;
    *) positional+=("$1"); shift ;;
  esac
done
if [ ${#positional[@]} -lt 1 ] || [ ${#positional[@]} -gt 2 ]; then
  echo "usage: $0 [options] BASE [HEAD] (see --help)" >&2
  exit 64
fi
if ! [ "$pairs" -ge 1 ] 2>/dev/null; then
  echo "bench-compare: --pairs must be a number of at least 1" >&2
  exit 64
fi

work=$root/target/bench-compare
mkdir -p "$work/src" "$work/build"

# The commit a revision names, or a clear error.
commit_of() {
  git rev-parse --verify --quiet "$1^{commit}" || {
    echo "bench-compare: $1 is not a commit of this repository" >&2
    exit 64
  }
}

# Builds the askgate binary of commit $1 in target directory $2 from a worktree of
# its own, with the environment's CARGO_PROFILE_RELEASE_* settings; prints the
# binary's path.
build_commit() {
  local commit=$1 target=$2 src=$work/src/$1
  if [ ! -d "$src" ]; then
    git worktree add --detach "$src" "$commit" >&2
  fi
  echo "bench-compare: building $commit (release) in $target" >&2
  (cd "$src" && CARGO_TARGET_DIR=$target cargo build --release --locked --quiet \
    -p askgate-service --bin askgate) >&2
  echo "$target/release/askgate"
}

# This checkout's [profile.release] settings as `CARGO_PROFILE_RELEASE_KEY=value`
# words (`lto = "fat"` gives CARGO_PROFILE_RELEASE_LTO=fat).
release_profile() {
  awk '
    /^\[/ { in_release = ($0 == "[profile.release]"); next }
    in_release && /^[a-z-]+ *= */ {
      key = $1; sub(/^[^=]*= */, ""); gsub(/"/, "")
      gsub(/-/, "_", key)
      printf "CARGO_PROFILE_RELEASE_%s=%s\n", toupper(key), $0
    }' Cargo.toml
}

base=$(commit_of "${positional[0]}")
base_name=$(git rev-parse --short "$base")
if [ "$same_profile" = 1 ]; then
  mapfile -t profile < <(release_profile)
  echo "bench-compare: BASE with this checkout's profile: ${profile[*]:-(none)}" >&2
  base_bin=$(env "${profile[@]}" bash -c "$(declare -f build_commit); work=$work; \
    build_commit $base ${base_target:-$work/build/$base-same-profile}")
  base_name="$base_name (same profile)"
else
  base_bin=$(build_commit "$base" "${base_target:-$work/build/$base}")
fi

# The load generator is always this checkout's: the same one drives both builds.
echo "bench-compare: building this checkout (release)" >&2
cargo build --release --locked --quiet -p askgate-service -p askgate-bench >&2
bench=$root/target/release/askgate-bench
if [ ${#positional[@]} -eq 2 ]; then
  head=$(commit_of "${positional[1]}")
  head_name=$(git rev-parse --short "$head")
  head_bin=$(build_commit "$head" "$work/build/$head")
else
  head_name="$(git rev-parse --short HEAD)"
  git diff --quiet HEAD -- || head_name="$head_name+changes"
  head_bin=$root/target/release/askgate
fi

out=${out:-$work/runs/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/base" "$out/head"

# The backends of LIST that binary $1 has (the sqlite engine came after some builds).
supported() {
  local bin=$1 list=$2 kept=() b help
  # Read whole before it is searched: grep -q leaving early would fail the pipe.
  help=$("$bin" serve --help 2>/dev/null || true)
  IFS=, read -ra wanted <<<"$list"
  for b in "${wanted[@]}"; do
    if [ "$b" = sqlite ] && [[ $help != *sqlite* ]]; then
      continue
    fi
    kept+=("$b")
  done
  (IFS=,; echo "${kept[*]}")
}

# One run of every scenario with build $1 (base or head), binary $2, run number $3.
run_build() {
  local which=$1 bin=$2 n=$3 figures log
  figures=$out/$which/run-$n.tsv
  log=$out/$which/run-$n.log
  local rt cap b
  rt=$(supported "$bin" "$backends")
  local extra=()
  [ "$action" = 1 ] && extra+=(--action)
  [ "$which" = head ] && [ "$policies" -gt 0 ] &&
    extra+=(--policies "$policies" --policy-actions "$policy_actions")
  echo "bench-compare: run $n of $pairs, $which ($bin): roundtrip $rt ${extra[*]}" >&2
  "$bench" --askgate "$bin" --figures "$figures" roundtrip \
    --backends "$rt" --concurrency 1,64 --asks "$asks" "${extra[@]}" >>"$log" 2>&1 || {
    echo "bench-compare: the run failed; its output is in $log" >&2
    tail -20 "$log" >&2
    exit 1
  }
  [ "$capacity" = none ] && return 0
  cap=$(supported "$bin" "$capacity")
  IFS=, read -ra cap_backends <<<"$cap"
  for b in "${cap_backends[@]}"; do
    echo "bench-compare: run $n of $pairs, $which: capacity $b" >&2
    "$bench" --askgate "$bin" --figures "$figures" capacity --backend "$b" \
      --pending "$pending" --settle 10s >>"$log" 2>&1 || {
      echo "bench-compare: the run failed; its output is in $log" >&2
      tail -20 "$log" >&2
      exit 1
    }
  done
}

for n in $(seq 1 "$pairs"); do
  # Alternate which build goes first, so a machine getting busier or quieter over
  # the comparison weighs on both alike.
  if [ $((n % 2)) -eq 1 ]; then
    run_build base "$base_bin" "$n"
    run_build head "$head_bin" "$n"
  else
    run_build head "$head_bin" "$n"
    run_build base "$base_bin" "$n"
  fi
done

{
  echo "$base_name (base) and $head_name (head): medians of $pairs alternated runs each;"
  echo "$(nproc) cores, $(date -u +%Y-%m-%d). Figures and logs: $out"
  echo
  "$bench" compare "$out/base" "$out/head" --base-name "$base_name" --head-name "$head_name"
} | tee "$out/compare.md"
