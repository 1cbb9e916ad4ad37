#!/usr/bin/env bash
# Rush vs Redis, side by side, on this machine; writes bench/results/REPORT.md
# (and results.json, throughput.png, latency-*.png).
#
#   bench/compare.sh [--quick] [--pin] [--debug] [--shards N] [--out DIR] [-- SUITE-OPTIONS...]
#
#   --quick    short run (under 2 minutes; CI's smoke run): exits non-zero if
#              any request of any workload failed
#   --pin      also run the headline closed-loop runs (every workload, every
#              server) in a pinned layout: the server alone on the first CPU
#              this script may use (taskset -c; rushd --shards 1), the client
#              on the second. Needs 2 CPUs and taskset (Debian: util-linux).
#              With --quick: a short pinned pass.
#   --debug    use debug binaries (no second ~17-minute RocksDB build);
#              also RUSH_BENCH_PROFILE=debug. Figures are then not meaningful.
#   --shards N rushd shard threads (default: one per core)
#   --out DIR  report directory (default bench/results)
#   anything after -- goes to `rush-bench suite` (see `rush-bench suite --help`)
#
# Installs redis-server, redis-benchmark (redis-tools) and a font for the
# charts from Debian packages if missing (needs root). Starts rushd and
# redis-server on 127.0.0.1 with temporary data directories, one at a time
# (the redis-benchmark rows: redis-benchmark against rushd's RESP listener and
# each redis-server); everything it starts is stopped when it ends, however
# it ends.
set -euo pipefail

cd "$(dirname "$0")/.."

quick=()
pin=0
profile="${RUSH_BENCH_PROFILE:-release}"
suite_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick) ;;
        --pin) pin=1; suite_args+=(--pin) ;;
        --debug) profile=debug ;;
        --release) profile=release ;;
        --shards) suite_args+=(--shards "$2"); shift ;;
        --out) suite_args+=(--out "$2"); shift ;;
        --) shift; suite_args+=("$@"); break ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ── prerequisites ───────────────────────────────────────────────────────
# The pinned layout's needs are checked before anything is installed or built.
if [ "$pin" = 1 ]; then
    if ! command -v taskset >/dev/null 2>&1; then
        echo "compare.sh: --pin needs taskset, which is in the util-linux package (apt-get install util-linux)" >&2
        exit 1
    fi
    # nproc counts the CPUs this process may run on (its affinity mask).
    cpus="$(nproc)"
    if [ "$cpus" -lt 2 ]; then
        echo "compare.sh: --pin needs 2 CPUs (one for the server, one for the client); this process may use $cpus" >&2
        exit 1
    fi
fi
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# redis-benchmark, for the suite's redis-benchmark phase (redis-server's
# package depends on it; listed for a system that has the server alone).
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "compare.sh: please install ${missing[*]} (apt-get install ${missing[*]})" >&2
        exit 1
    fi
    echo "compare.sh: installing ${missing[*]}" >&2
    # Keep the package from starting a system-wide redis on port 6379: the
    # bench starts its own, on free loopback ports.
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

# ── build ───────────────────────────────────────────────────────────────
target_dir="${CARGO_TARGET_DIR:-target}"
if [ "$profile" = release ]; then
    cargo build --release --workspace
else
    cargo build --workspace
fi
bin="$target_dir/$profile"

# ── run ─────────────────────────────────────────────────────────────────
# The suite starts the servers with a parent-death signal, so they die with
# it; the trap makes sure the suite itself does not outlive this script.
suite_pid=
cleanup() {
    if [ -n "$suite_pid" ] && kill -0 "$suite_pid" 2>/dev/null; then
        kill "$suite_pid" 2>/dev/null || true
        wait "$suite_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

"$bin/rush-bench" suite --rushd "$bin/rushd" --redis-server "$(command -v redis-server)" \
    ${quick[@]+"${quick[@]}"} ${suite_args[@]+"${suite_args[@]}"} &
suite_pid=$!
status=0
wait "$suite_pid" || status=$?
suite_pid=
exit "$status"
