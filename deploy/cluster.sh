#!/usr/bin/env bash
# A local Rush cluster on loopback, for trying things out and for tests.
#
#   deploy/cluster.sh up [N] [--base-port P] [--dir DIR]   start N nodes (default 3) and create the cluster
#   deploy/cluster.sh rolling-restart [--dir DIR]           restart the nodes one at a time (SIGTERM, wait for /ready)
#   deploy/cluster.sh status [--dir DIR]                    processes, /ready, and the cluster map
#   deploy/cluster.sh down [--dir DIR]                      stop every node (SIGTERM, then SIGKILL after 30 s)
#
# Node i (0-based) is "node-i" and listens on loopback:
#   protocol  P + 4i      (default P = 7379: node-0 is on the usual ports)
#   HTTP      P + 4i + 1  (/metrics, /health, /ready)
#   RESP      P + 4i + 2  (redis-cli -c -p P+2; the default place, which the
#                          cluster map then leaves unsaid)
#   redirects P + 4i + 3  (GET /{code})
# Everything lives in DIR (default ./rush-cluster): node-i/ (data),
# node-i.log, node-i.pid, and cluster.env (N, P and the ports per node, for
# the other commands; a cluster made when nodes had 3 ports keeps them, with
# RESP off).
# `up` on a DIR that already holds a cluster starts it again as it was.
#
# Binaries: $RUSHD and $RUSH when set, else target/release, else
# target/debug of this repository, else whatever is on PATH. Extra rushd
# flags can go in $RUSHD_ARGS (e.g. "--shards 2"); RUSH_LOG sets the log level.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"

die() { echo "cluster.sh: $*" >&2; exit 1; }

find_bin() { # name env-value
  if [[ -n "$2" ]]; then echo "$2"; return; fi
  for p in "$root/target/release/$1" "$root/target/debug/$1"; do
    if [[ -x "$p" ]]; then echo "$p"; return; fi
  done
  command -v "$1" || die "no $1 binary: build it (cargo build --release) or set \$${1^^}"
}

cmd="${1:-}"; [[ -n "$cmd" ]] && shift || true
nodes=3; base=7379; stride=4; dir="$PWD/rush-cluster"
# The settings of the cluster in $dir. One made when nodes had 3 ports has
# no stride in its cluster.env.
load_env() {
  stride=""
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  stride="${stride:-3}"
}
if [[ "$cmd" == up && "${1:-}" =~ ^[0-9]+$ ]]; then nodes="$1"; shift; fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base-port) base="${2:?--base-port needs a port}"; shift 2 ;;
    --dir) dir="${2:?--dir needs a directory}"; shift 2 ;;
    *) die "unknown argument: $1 (see the top of $0)" ;;
  esac
done
[[ "$nodes" -ge 1 ]] || die "N must be at least 1"
mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"
if [[ "$cmd" != up ]]; then
  [[ -f "$dir/cluster.env" ]] || die "no cluster in $dir (run: $0 up)"
  load_env
fi

port() { echo $((base + stride * $1 + $2)); }  # node, offset (0 protocol, 1 HTTP, 2 RESP, 3 redirects)
addr() { echo "127.0.0.1:$(port "$1" 0)"; }
pidfile() { echo "$dir/node-$1.pid"; }

alive() { # node
  local f; f="$(pidfile "$1")"
  [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

# The HTTP status of GET path on 127.0.0.1:port (no curl needed).
http_status() { # port path
  local line
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || { echo 000; return; }
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$2" >&3
  IFS= read -r -t 5 line <&3 || line=""
  exec 3>&- 3<&-
  line="${line#HTTP/1.1 }"; echo "${line%% *}"
}

start_node() { # node
  local i="$1"
  alive "$i" && die "node-$i is already running (pid $(cat "$(pidfile "$i")"))"
  local listeners=(--resp "127.0.0.1:$(port "$i" 2)" --redirect "127.0.0.1:$(port "$i" 3)")
  # 3 ports a node: the redirects have the RESP listener's default place.
  (( stride == 4 )) || listeners=(--resp "" --redirect "127.0.0.1:$(port "$i" 2)")
  # shellcheck disable=SC2086
  nohup "$RUSHD" --node-id "node-$i" --data "$dir/node-$i" \
    --listen "$(addr "$i")" --http "127.0.0.1:$(port "$i" 1)" \
    "${listeners[@]}" ${RUSHD_ARGS:-} \
    >>"$dir/node-$i.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$i")"
}

wait_ready() { # node
  local i="$1" t=0
  until [[ "$(http_status "$(port "$i" 1)" /ready)" == 200 ]]; do
    alive "$i" || { tail -n 20 "$dir/node-$i.log" >&2; die "node-$i exited while starting (log: $dir/node-$i.log)"; }
    (( t++ < 600 )) || die "node-$i not ready after 60 s (log: $dir/node-$i.log)"
    sleep 0.1
  done
}

stop_node() { # node
  local i="$1" f pid t=0
  f="$(pidfile "$i")"
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if kill -TERM "$pid" 2>/dev/null; then
    # SIGTERM drains: /ready turns false, in-flight requests finish, exit 0.
    while kill -0 "$pid" 2>/dev/null; do
      if (( t++ > 300 )); then echo "node-$i did not stop within 30 s: SIGKILL" >&2; kill -9 "$pid" 2>/dev/null || true; fi
      sleep 0.1
    done
  fi
  rm -f "$f"
}

RUSHD="$(find_bin rushd "${RUSHD:-}")"
RUSH="$(find_bin rush "${RUSH:-}")"

case "$cmd" in
  up)
    if [[ -f "$dir/cluster.env" ]]; then load_env; fi
    echo "nodes=$nodes base=$base stride=$stride" >"$dir/cluster.env"
    started=()
    # Whatever fails (or ^C) before the cluster is up stops what started.
    cleanup() { for i in "${started[@]}"; do stop_node "$i"; done; }
    trap cleanup EXIT
    trap 'exit 1' INT TERM
    for ((i = 0; i < nodes; i++)); do start_node "$i"; started+=("$i"); done
    for ((i = 0; i < nodes; i++)); do wait_ready "$i"; done
    addrs=(); for ((i = 0; i < nodes; i++)); do addrs+=("$(addr "$i")"); done
    # A new cluster (node-0 runs no map yet) gets one; an existing one
    # keeps the map its nodes stored (slots may have moved since).
    map="$("$RUSH" --addr "${addrs[0]}" cluster slots)"
    if [[ "${map%%$'\n'*}" == "epoch 0" ]]; then
      "$RUSH" --addr "${addrs[0]}" cluster create "${addrs[@]}" >/dev/null
    fi
    trap - EXIT INT TERM
    echo "cluster of $nodes nodes up in $dir (node-0 at ${addrs[0]})"
    "$RUSH" --addr "${addrs[0]}" cluster nodes
    ;;
  rolling-restart)
    for ((i = 0; i < nodes; i++)); do
      started_at=$SECONDS
      stop_node "$i"
      start_node "$i"
      wait_ready "$i"
      echo "node-$i restarted and ready ($((SECONDS - started_at)) s)"
    done
    ;;
  status)
    down=0
    for ((i = 0; i < nodes; i++)); do
      if alive "$i"; then
        echo "node-$i $(addr "$i") pid $(cat "$(pidfile "$i")") ready=$(http_status "$(port "$i" 1)" /ready)$( (( stride == 4 )) && echo " resp=127.0.0.1:$(port "$i" 2)")"
      else
        echo "node-$i $(addr "$i") down"; down=1
      fi
    done
    for ((i = 0; i < nodes; i++)); do
      if alive "$i"; then "$RUSH" --addr "$(addr "$i")" --timeout 5 cluster nodes && break; fi
    done
    exit "$down"
    ;;
  down)
    for ((i = 0; i < nodes; i++)); do stop_node "$i"; done
    echo "cluster in $dir stopped"
    ;;
  *)
    die "usage: $0 up [N] [--base-port P] [--dir DIR] | down | rolling-restart | status [--dir DIR]"
    ;;
esac
