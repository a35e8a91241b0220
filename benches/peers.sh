#!/usr/bin/env bash
# Side by side on one API server (README "Performance"): fabrik, k9s and kdash, each in its
# own tmux (200×50) on the test control plane with `fabrik sim --workload`.
#
#   benches/peers.sh [NODES] [PODS] [SECONDS] [RUNS]      (default 1000 10000 60 2)
#
# Per tool and run:
#   nodes_s   start → the node list complete on screen (fabrik: `Fleet [N/N]`; k9s: the
#             `nodes(all)[N]` title; kdash: the Nodes tab title count)
#   pods_s    start → every pod on screen (fabrik: `Pods [P/P]`, the pods that ask for GPUs,
#             which is what its pods view lists; k9s `-A`, then `:pods`: `pods(all)[P]`; kdash)
#   rss_mib   RSS SECONDS after the pods were complete (the pods view open)
#   cpu_pct   CPU over the next SECONDS, a quiet cluster, in % of one core
#   tty_bps   bytes the tool wrote to its terminal per second over those SECONDS (tmux
#             pipe-pane counts what the program writes to the pty)
# and the physical limit: `GET /api/v1/pods?resourceVersion=0` (the API server's watch cache,
# one JSON list) and the same for nodes, timed with curl (median of 3).
#
# fabrik runs twice: as shipped (consistent lists in pages of 500, `initial_list = "pages"`)
# and with `initial_list = "stream"` (watch-lists from a consistent read). The pod list the raw figure timed is kept as DIR/pods.json for
# `fabrik bench --decode` (the client's decode throughput on the same objects). k9s and kdash are used when found: $K9S / $KDASH, else
# on PATH. Build them with:
#   GOBIN=/tmp/peers/bin go install github.com/derailed/k9s@v0.50.16
#   cargo install kdash --version 2.1.1 --root /tmp/peers
# A wait gives up 300 s after the tool started (-1 in that run's line); medians leave such
# runs out, and a figure no run reached is `(none)` in the table and null in the JSON.
# Prints a table and, last, one JSON object (medians per tool, ratios against fabrik).
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000}
PODS=${2:-10000}
SECS=${3:-60}
RUNS=${4:-2}
BIN=$PWD/target/release/fabrik
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
K9S=${K9S:-$(command -v k9s || echo /tmp/peers/bin/k9s)}
KDASH=${KDASH:-$(command -v kdash || echo /tmp/peers/bin/kdash)}
DIR=$(mktemp -d /tmp/fabrik-bench-peers-XXXX)
tests/controlplane/cp.sh up "$DIR" >/dev/null
KC="$DIR/kubeconfig"
T="tmux -L fabrik-peers"
cleanup() {
  [ -n "${SIM:-}" ] && kill "$SIM" 2>/dev/null || true
  $T kill-server 2>/dev/null || true
  tests/controlplane/cp.sh down "$DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# shellcheck source=benches/sim.sh
. benches/sim.sh
sim_up "$BIN" "$KC" "$DIR" "$NODES" "$PODS"
# Let the scheduler place what it can (the Pending count unchanged for 30 s, at most 5
# minutes), then take the counts every tool must reach.
K="kubectl --kubeconfig $KC"
last=-1 same=0
for _ in $(seq 1 30); do
  sleep 10
  p=$($K get pods -A --no-headers --field-selector=status.phase=Pending 2>/dev/null | wc -l)
  if [ "$p" = "$last" ]; then same=$((same + 1)); else same=0; fi
  last=$p
  [ "$same" -ge 3 ] && break
done
NODE_N=$($K get nodes --no-headers | wc -l)
POD_N=$($K get pods -A --no-headers | wc -l)
# fabrik's pods view lists the pods that ask for GPUs (the vCluster control plane's does not).
POD_GPU=$("$BIN" --kubeconfig "$KC" snapshot --view pods --format json --timeout-secs 300 |
  python3 -c 'import json, sys; print(len(json.load(sys.stdin)["rows"]))')
echo "fabrik sim: $(cat "$DIR/sim.out"); $NODE_N nodes, $POD_N pods ($POD_GPU with GPUs)"
SERVER=$($K config view --minify -o jsonpath='{.clusters[0].cluster.server}')
TOKEN=$($K config view --minify --raw -o jsonpath='{.users[0].user.token}')
raw() { # path → "seconds bytes", median of 3
  for _ in 1 2 3; do
    curl -sk -H "Authorization: Bearer $TOKEN" -H 'Accept: application/json' "$SERVER$1" -o /dev/null \
      -w '%{time_total} %{size_download}\n'
  done | sort -n | sed -n 2p
}
read -r RAW_PODS_S RAW_PODS_B <<<"$(raw '/api/v1/pods?resourceVersion=0')"
curl -sk -H "Authorization: Bearer $TOKEN" -H 'Accept: application/json' "$SERVER/api/v1/pods?resourceVersion=0" \
  -o "$DIR/pods.json"
read -r RAW_NODES_S RAW_NODES_B <<<"$(raw '/api/v1/nodes?resourceVersion=0')"
echo "raw list (watch cache, curl): pods ${RAW_PODS_S} s (${RAW_PODS_B} B), nodes ${RAW_NODES_S} s (${RAW_NODES_B} B)"
mkdir -p "$DIR/pages/fabrik" "$DIR/stream/fabrik" "$DIR/data"
echo 'initial_list = "stream"' >"$DIR/stream/fabrik/config.toml"
echo 'initial_list = "pages"' >"$DIR/pages/fabrik/config.toml"
# k9s writes counts with thousands separators: nodes(all)[1,000].
grouped() { python3 -c 'import sys; print(f"{int(sys.argv[1]):,}")' "$1"; }
clk=$(getconf CLK_TCK)
now() { date +%s.%N; }
# wait_for PATTERN LIMIT → seconds since $t0, or -1 when the screen never showed it
wait_for() {
  while ! $T capture-pane -p -t b | grep -Eiq "$1"; do
    if (($(echo "$(now) - $t0 > $2" | bc))); then echo -1; return; fi
    sleep 0.05
  done
  echo "$(now) - $t0" | bc
}
# run TOOL RUN COMMAND NODES_PATTERN PODS_PATTERN KEYS_FOR_PODS
run() {
  local tool=$1 n=$2 cmd=$3 nodes_re=$4 pods_re=$5 keys=$6
  $T kill-server 2>/dev/null || true
  : >"$DIR/$tool.$n.tty"
  # The pane starts paused, so pipe-pane is attached before the tool writes a byte.
  $T -f /dev/null new-session -d -s b -x 200 -y 50 "read -r _; exec $cmd"
  $T pipe-pane -t b -o "cat >>$DIR/$tool.$n.tty"
  local pid t_nodes t_pods
  t0=$(now)
  $T send-keys -t b Enter
  t_nodes=$(wait_for "$nodes_re" 300)
  [ -n "$keys" ] && $T send-keys -t b $keys
  t_pods=$(wait_for "$pods_re" 300)
  pid=$($T display -p -t b '#{pane_pid}')
  sleep "$SECS"
  local c0 c1 b0 b1 rss
  c0=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  b0=$(stat -c %s "$DIR/$tool.$n.tty")
  sleep "$SECS"
  c1=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  b1=$(stat -c %s "$DIR/$tool.$n.tty")
  rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status)
  $T capture-pane -p -t b >"$DIR/$tool.$n.screen"
  $T kill-server 2>/dev/null || true
  sleep 1
  awk -v tool="$tool" -v n="$n" -v tn="$t_nodes" -v tp="$t_pods" -v r="$rss" -v t=$((c1 - c0)) -v c="$clk" \
    -v d="$SECS" -v b=$((b1 - b0)) 'BEGIN {
      printf "%-14s run %d  nodes %7.2f s  pods %7.2f s  RSS %7.1f MiB  CPU %6.2f%%  tty %9.0f B/s\n",
        tool, n, tn, tp, r/1024, 100*t/c/d, b/d;
      printf "{\"tool\":\"%s\",\"run\":%d,\"nodes_s\":%.3f,\"pods_s\":%.3f,\"rss_mib\":%.1f,\"cpu_pct\":%.2f,\"tty_bps\":%.0f}\n",
        tool, n, tn, tp, r/1024, 100*t/c/d, b/d > "/dev/stderr" }' 2>>"$DIR/runs.jsonl"
}
FAB="env XDG_DATA_HOME=$DIR/data FABRIK_DATA_DIR=$DIR/data $BIN --kubeconfig $KC"
for n in $(seq 1 "$RUNS"); do
  # fabrik: the fleet title, then the pods view (`5`) with every pod.
  run fabrik "$n" "env FABRIK_CONFIG_DIR=$DIR/pages/fabrik $FAB" "Fleet \[$NODE_N/$NODE_N\]" \
    "Pods \[$POD_GPU/$POD_GPU\]" 5
  run fabrik-stream "$n" "env FABRIK_CONFIG_DIR=$DIR/stream/fabrik $FAB" "Fleet \[$NODE_N/$NODE_N\]" \
    "Pods \[$POD_GPU/$POD_GPU\]" 5
  if [ -x "$K9S" ]; then
    # k9s: its own config and logs away from the user's; `-A` so pods means every namespace.
    run k9s "$n" "env XDG_CONFIG_HOME=$DIR/k9s XDG_STATE_HOME=$DIR/k9s XDG_DATA_HOME=$DIR/k9s $K9S --kubeconfig $KC -A -c nodes" \
      "nodes\(all\)\[$(grouped "$NODE_N")\]" "pods\(all\)\[$(grouped "$POD_N")\]" ":pods Enter"
  fi
  if [ -x "$KDASH" ]; then
    # kdash opens on its overview, whose resource tabs carry counts: `Nodes [1000]`, and
    # the pods table's title `Pods (ns: all) [9986]`.
    run kdash "$n" "env KUBECONFIG=$KC $KDASH" "Nodes \[$NODE_N\]" "Pods \(ns: all\) \[$POD_N\]" ""
  fi
done
# The raw list again, now that every tool has run on a quieter cluster.
read -r RAW2_S _ <<<"$(raw '/api/v1/pods?resourceVersion=0')"
echo "raw pod list again: ${RAW2_S} s"
RAW_PODS_S=$(python3 -c 'import sys; print(min(map(float, sys.argv[1:])))' "$RAW_PODS_S" "$RAW2_S")
python3 - "$DIR/runs.jsonl" "$NODE_N" "$POD_N" "$RAW_PODS_S" "$RAW_PODS_B" "$RAW_NODES_S" "$RAW_NODES_B" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tools = {}
for r in rows:
    tools.setdefault(r["tool"], []).append(r)
keys = ["nodes_s", "pods_s", "rss_mib", "cpu_pct", "tty_bps"]
# A wait that timed out is -1: it is no time, so medians are over the runs that finished
# (null when none did).
def median(vals):
    vals = [v for v in vals if v >= 0]
    return statistics.median(vals) if vals else None
med = {t: {k: median(r[k] for r in rs) for k in keys} for t, rs in tools.items()}
out = {"nodes": int(sys.argv[2]), "pods": int(sys.argv[3]),
       "raw_list": {"pods_s": float(sys.argv[4]), "pods_bytes": int(sys.argv[5]),
                    "nodes_s": float(sys.argv[6]), "nodes_bytes": int(sys.argv[7])},
       "median": med, "runs": rows}
f = med.get("fabrik")
if f:
    out["ratio_to_fabrik"] = {t: {k: (round(m[k] / f[k], 2) if f[k] and m[k] is not None else None) for k in keys}
                              for t, m in med.items() if t != "fabrik"}
    out["fabrik_pods_over_raw_list"] = f["pods_s"] and round(f["pods_s"] / float(sys.argv[4]), 2)
print()
print(f"{'tool':<14}{'nodes s':>9}{'pods s':>9}{'RSS MiB':>10}{'CPU %':>8}{'tty B/s':>10}")
fmt = lambda x, w, p: f"{x:>{w}.{p}f}" if x is not None else f"{'(none)':>{w}}"
for t, m in med.items():
    print(f"{t:<14}{fmt(m['nodes_s'], 9, 2)}{fmt(m['pods_s'], 9, 2)}{fmt(m['rss_mib'], 10, 1)}"
          f"{fmt(m['cpu_pct'], 8, 2)}{fmt(m['tty_bps'], 10, 0)}")
print(json.dumps(out))
PY
