#!/usr/bin/env bash
# A/B of server builds or settings in the pinned layout: each server alone on
# the first CPU (taskset), rush-bench alone on the second, a fresh server and
# data directory per run, the sides alternating round by round. Prints one
# line per run: server CPU µs per operation (the deciding figure; in
# brackets the part of it that was background work: rushd's RocksDB
# flushes and compactions, Redis's AOF rewrites), throughput and p99
# latency, then the means of each side.
#
#   bench/ab.sh [--rounds N] [--duration S] [--keys N] [--pipeline P]
#               [--connections C] [--preload] [--after W] WORKLOAD SIDE [SIDE...]
#
# --after W runs workload W's preload (and 1 s of W) on each fresh server
# first, so the measured workload meets a database that already holds W's
# keys, as in compare.sh, where one server runs every workload in turn
# (rushd gets 5 s more to write the preload back). W may be a comma-separated
# list, run in its order (compare.sh's order: kv-set,kv-get,kv-incr,…).
#
# A SIDE is one of
#   rush:BINARY[:ARGS]   rushd BINARY started with --shards 1 and ARGS (words
#                        split on commas: rush:target/release/rushd:--config,x.toml)
#   redis:everysec | redis:always
#                        redis-server with AOF and that appendfsync
# e.g. bench/ab.sh --rounds 3 kv-set rush:/tmp/base/rushd rush:target/release/rushd redis:everysec
#
# Loopback only; everything it starts is stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 duration=8 keys=1000000 pipeline=16 connections=50 preload=() after=
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift ;;
        --duration) duration=$2; shift ;;
        --keys) keys=$2; shift ;;
        --pipeline) pipeline=$2; shift ;;
        --connections) connections=$2; shift ;;
        --preload) preload=(--preload) ;;
        --after) after=$2; shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        -*) echo "ab.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
[ $# -ge 2 ] || { echo "ab.sh: need a WORKLOAD and at least one SIDE (--help)" >&2; exit 2; }
workload=$1; shift
sides=("$@")
bench=${RUSH_BENCH:-target/release/rush-bench}
[ -x "$bench" ] || { echo "ab.sh: $bench is missing (cargo build --release -p rush-bench)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "ab.sh: needs taskset (util-linux)" >&2; exit 1; }
read -r c0 c1 < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }' | head -2 | xargs)
[ -n "${c1:-}" ] || { echo "ab.sh: needs two CPUs" >&2; exit 1; }

work=$(mktemp -d)
server=""
cleanup() {
    [ -n "$server" ] && kill -9 "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start SIDE: sets $server (pid) and $target.
start() {
    local side=$1 data="$work/data" port
    rm -rf "$data"; mkdir -p "$data"
    port=$(free_port)
    case "$side" in
        rush:*)
            local rest=${side#rush:} bin args=()
            bin=${rest%%:*}
            [ "$rest" != "$bin" ] && IFS=, read -r -a args <<<"${rest#*:}"
            taskset -c "$c0" "$bin" --listen "127.0.0.1:$port" --http "" --resp "" \
                --data "$data" --shards 1 "${args[@]}" >"$work/server.log" 2>&1 &
            server=$!
            target="rush://127.0.0.1:$port"
            ;;
        redis:everysec|redis:always)
            taskset -c "$c0" redis-server --port "$port" --bind 127.0.0.1 --dir "$data" \
                --save "" --appendonly yes --appendfsync "${side#redis:}" \
                --daemonize no >"$work/server.log" 2>&1 &
            server=$!
            target="redis://127.0.0.1:$port"
            ;;
        *) echo "ab.sh: unknown side $side" >&2; exit 2 ;;
    esac
    for _ in $(seq 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "ab.sh: $side did not start:" >&2; cat "$work/server.log" >&2; exit 1
}

declare -A cpu_sum ops_sum
for round in $(seq "$rounds"); do
    for i in "${!sides[@]}"; do
        side=${sides[$i]}
        start "$side"
        IFS=, read -r -a befores <<<"$after"
        for before in "${befores[@]}"; do
            taskset -c "$c1" "$bench" "$before" --target "$target" --connections "$connections" \
                --pipeline "$pipeline" --duration 1 --keys "$keys" --threads 1 --quiet \
                --preload >/dev/null
            case "$side" in rush:*) sleep 5 ;; esac
        done
        taskset -c "$c1" "$bench" "$workload" --target "$target" --server-pid "$server" \
            --connections "$connections" --pipeline "$pipeline" --duration "$duration" \
            --keys "$keys" --threads 1 --quiet "${preload[@]}" --json "$work/run.json" >/dev/null
        kill -9 "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""
        read -r cpu ops p99 bg < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["server_cpu_secs"] * 1e6 / r["ok"], r["throughput"], r["latency"]["p99_us"] / 1000,
      r.get("server_background_secs", 0) * 1e6 / r["ok"])' "$work/run.json")
        printf 'round %d  %-50s %7.2f µs/op (background %5.2f) %10.0f /s  p99 %6.2f ms\n' \
            "$round" "$side" "$cpu" "$bg" "$ops" "$p99"
        cpu_sum[$i]=$(python3 -c "print(${cpu_sum[$i]:-0} + $cpu)")
        ops_sum[$i]=$(python3 -c "print(${ops_sum[$i]:-0} + $ops)")
    done
done
for i in "${!sides[@]}"; do
    python3 -c "print('mean     %-50s %7.2f µs/op %10.0f /s' % ('${sides[$i]}', ${cpu_sum[$i]} / $rounds, ${ops_sum[$i]} / $rounds))"
done
