#!/usr/bin/env bash
# Many clusters in one cockpit (README "Performance"): RSS and CPU of the cockpit watching
# one cluster and K clusters of N nodes each, on a quiet cluster.
#
#   benches/clusters.sh [K] [NODES] [PODS] [SECONDS]     (default 10 500 2000 60)
#
# One test control plane with `fabrik sim --nodes N --workload --pods P`, and a kubeconfig
# with K contexts for it (c1 … cK): each context is a cluster to the cockpit — its own
# client, watches, fleet and operations server — while the API server is shared (a machine
# with 2 cores does not hold K control planes). The cockpit runs in tmux (200×50) with
# `--context c1`, then with `--all-contexts`; each run waits until every cluster is live
# (the clusters view, `0`), then measures RSS and CPU over SECONDS. Prints a table and one
# JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${1:-10}
NODES=${2:-500}
PODS=${3:-2000}
SECS=${4:-60}
BIN=target/release/fabrik
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
DIR=$(mktemp -d /tmp/fabrik-bench-clusters-XXXX)
tests/controlplane/cp.sh up "$DIR" >/dev/null
KC="$DIR/kubeconfig"
cleanup() {
  [ -n "${SIM:-}" ] && kill "$SIM" 2>/dev/null || true
  tmux -L fabrik-bench-cl kill-server 2>/dev/null || true
  tests/controlplane/cp.sh down "$DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# shellcheck source=benches/sim.sh
. benches/sim.sh
sim_up "$BIN" "$KC" "$DIR" "$NODES" "$PODS"
sleep 20 # pods Pending -> Running
# K contexts, c1 … cK, each the whole test cluster.
kubectl --kubeconfig "$KC" config view --flatten -o json | python3 -c '
import json, sys
k = int(sys.argv[1]); kc = json.load(sys.stdin)
c = kc["contexts"][0]["context"]
kc["contexts"] = [{"name": f"c{i}", "context": dict(c)} for i in range(1, k + 1)]
kc["current-context"] = "c1"
json.dump(kc, open(sys.argv[2], "w"))' "$K" "$DIR/many.kubeconfig"
clk=$(getconf CLK_TCK)
run() { # label clusters args…
  local label=$1 want=$2; shift 2
  tmux -L fabrik-bench-cl -f /dev/null new-session -d -s b -x 200 -y 50 \
    "XDG_CONFIG_HOME=$DIR/cfg XDG_DATA_HOME=$DIR/data $BIN --kubeconfig $DIR/many.kubeconfig $*"
  local t0 t1 n pid c0 c1 rss
  t0=$(date +%s.%N)
  until tmux -L fabrik-bench-cl capture-pane -p -t b | grep -q "nodes [0-9]*/$NODES ready"; do sleep 0.1; done
  tmux -L fabrik-bench-cl send-keys -t b 0
  until [ "$(tmux -L fabrik-bench-cl capture-pane -p -t b | grep -c '  live  ')" -ge "$want" ]; do sleep 0.2; done
  t1=$(date +%s.%N)
  pid=$(pgrep -f "^$BIN --kubeconfig $DIR/many.kubeconfig" | head -1)
  sleep 5
  c0=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  sleep "$SECS"
  c1=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status)
  tmux -L fabrik-bench-cl kill-server 2>/dev/null || true
  sleep 1
  awk -v l="$label" -v w="$want" -v s="$(echo "$t1 - $t0" | bc)" -v t=$((c1 - c0)) -v c="$clk" -v d="$SECS" -v r="$rss" \
    'BEGIN { printf "%-22s %2d live after %6.2f s   RSS %7.1f MiB   CPU %5.2f%% of a core\n", l, w, s, r/1024, 100*t/c/d;
             printf "{\"run\":\"%s\",\"clusters\":%d,\"live_s\":%.2f,\"rss_mib\":%.1f,\"cpu_pct\":%.2f}\n", l, w, s, r/1024, 100*t/c/d > "/dev/stderr" }'
}
echo "fabrik sim: $(cat "$DIR/sim.out"); ${SECS}s windows on a quiet cluster"
run "one cluster" 1 --context c1 2>>"$DIR/results.json"
run "$K clusters" "$K" --all-contexts 2>>"$DIR/results.json"
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
one, many = rows
print(json.dumps({"nodes": int(sys.argv[2]), "pods": int(sys.argv[3]), "runs": rows,
  "rss_per_extra_cluster_mib": round((many["rss_mib"] - one["rss_mib"]) / max(1, many["clusters"] - 1), 1)}))' \
  "$DIR/results.json" "$NODES" "$PODS"
