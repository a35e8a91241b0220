#!/usr/bin/env bash
# Start-up on a real control plane: time from start to a complete fleet view, and fabrik's
# RSS, with N simulated nodes and P pods (README "Performance").
#
#   benches/cluster.sh [NODES] [PODS]        (default 1000 10000)
#
# Starts the test control plane (tests/controlplane), `fabrik sim --nodes N --workload
# --pods P`, waits until every pod the scheduler could place is Running, then runs
# `fabrik snapshot` three times (connect, list every kind, build the fleet, print) and the
# cockpit once in tmux (first frame with all nodes), reporting wall time and peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000}
PODS=${2:-10000}
BIN=target/release/fabrik
[ -x "$BIN" ] || cargo build --release
DIR=$(mktemp -d /tmp/fabrik-bench-XXXX)
tests/controlplane/cp.sh up "$DIR" >/dev/null
KC="$DIR/kubeconfig"
cleanup() {
  [ -n "${SIM:-}" ] && kill "$SIM" 2>/dev/null || true
  tmux -L fabrik-bench kill-server 2>/dev/null || true
  tests/controlplane/cp.sh down "$DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
start=$(date +%s.%N)
# shellcheck source=benches/sim.sh
. benches/sim.sh
sim_up "$BIN" "$KC" "$DIR" "$NODES" "$PODS"
ready=$(date +%s.%N)
echo "fabrik sim READY after $(echo "$ready - $start" | bc) s: $(cat "$DIR/sim.out")"
# Let the scheduler and the simulated kubelets catch up (pods Pending -> Running).
sleep 30
for i in 1 2 3; do
  /usr/bin/time -f "snapshot run $i: %e s wall, %M KiB peak RSS" \
    "$BIN" --kubeconfig "$KC" snapshot --view fleet --format json --timeout-secs 300 >"$DIR/snap.json"
done
python3 - "$DIR/snap.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"snapshot rows (nodes): {len(d['rows'])}")
PY
# The cockpit in a terminal: time until the header shows every node, then its RSS.
tmux -L fabrik-bench -f /dev/null new-session -d -s b -x 200 -y 50 "$BIN --kubeconfig $KC"
t0=$(date +%s.%N)
until tmux -L fabrik-bench capture-pane -p -t b | grep -q "nodes [0-9]*/$NODES ready"; do
  sleep 0.1
  if (( $(echo "$(date +%s.%N) - $t0 > 300" | bc) )); then echo "cockpit: no full fleet in 300 s"; break; fi
done
t1=$(date +%s.%N)
sleep 5
pid=$(pgrep -f "^$BIN --kubeconfig $KC$" | head -1)
echo "cockpit: full fleet on screen after $(echo "$t1 - $t0" | bc) s; RSS $(ps -o rss= -p "$pid") KiB (5 s later)"
tmux -L fabrik-bench capture-pane -p -t b | head -3
