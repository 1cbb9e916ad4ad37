#!/usr/bin/env bash
# What a replica costs its primary: WORKLOAD (kv-set by default; `mixed`
# runs every service at once, preloaded) against a primary alone, with an
# asynchronous replica, and with replication.min_acks = 1, round by round,
# each on fresh nodes. The primary runs --shards 1 on the first CPU; the
# replica and rush-bench share the second (on a 2-core machine). Prints
# rush-bench's throughput, latency and CPU per operation for each, the
# replica's CPU seconds, and its lag in group commits as the primary sees it
# (its heads against the replica's last fetch, sampled every 0.2 s).
#
#   bench/replication-cost.sh [ROUNDS] [SECONDS] [WORKLOAD]
#
# Loopback only (ports 7601, 7608, 7611); everything it starts is stopped.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2} secs=${2:-8} workload=${3:-kv-set}
extra=()
[ "$workload" = kv-set ] || extra=(--preload --keys 100000)
bin=target/release
for b in rushd rush rush-bench; do
    [ -x "$bin/$b" ] || { echo "replication-cost.sh: $bin/$b is missing (cargo build --release)" >&2; exit 1; }
done
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
printf '[replication]\nmin_acks = 1\nack_timeout_ms = 5000\n' > "$work/sync.toml"
printf '[replication]\nmin_acks = 0\n' > "$work/async.toml"
for r in $(seq 1 "$rounds"); do
    for mode in none async sync; do
        rm -rf "$work/p" "$work/r"
        cfg=$work/async.toml; [ $mode = sync ] && cfg=$work/sync.toml
        taskset -c 0 "$bin/rushd" --shards 1 --listen 127.0.0.1:7601 --http "" --resp "" \
            --data "$work/p" --replication-listen 127.0.0.1:7608 --config "$cfg" >/dev/null 2>"$work/p.err" &
        p=$!; pids=($p)
        sleep 1
        rep=
        if [ $mode != none ]; then
            taskset -c 1 "$bin/rushd" --shards 1 --listen 127.0.0.1:7611 --http "" --resp "" \
                --data "$work/r" --replica-of 127.0.0.1:7608 >/dev/null 2>"$work/r.err" &
            rep=$!; pids+=($rep)
            for _ in $(seq 1 50); do
                "$bin/rush" --addr 127.0.0.1:7611 replication status 2>/dev/null | grep -q "state: following" && break
                sleep 0.2
            done
        fi
        : > "$work/lag"
        if [ -n "$rep" ]; then
            (while kill -0 "$rep" 2>/dev/null; do
                "$bin/rush" --addr 127.0.0.1:7601 replication status 2>/dev/null \
                    | awk -F': ' '/^replication_replica_lag_records/ {print $2}' >> "$work/lag"
                sleep 0.2
            done) &
            pids+=($!)
        fi
        out=$(taskset -c 1 "$bin/rush-bench" "$workload" --target rush://127.0.0.1:7601 --duration "$secs" \
            -P 16 -c 50 --server-pid "$p" -q "${extra[@]}" 2>&1 | grep -iE "throughput|latency|cpu" | tr -s ' ' | tr '\n' ' ')
        cpu=
        if [ -n "$rep" ]; then
            cpu=" replica CPU $(awk '{printf "%.1f s", ($14+$15)/100}' "/proc/$rep/stat")"
            cpu+="; lag $(awk 'NF == 1 { n++; t += $1; if ($1 > m) m = $1 } END {printf "mean %.1f, at most %d group commits", (n ? t / n : 0), m}' "$work/lag")"
        fi
        echo "round $r $workload $mode: $out$cpu"
        kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=()
    done
done
