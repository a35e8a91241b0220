#!/usr/bin/env bash
# The node agent's own cost (README "The node agent"): CPU and RSS of `fabrik agent --fake 8`
# sampling every second, alone and with stream readers, and the bytes of one sample set; then
# one agent of `fabrik sim --agents` on the test control plane, which also asks the sim's
# kubelet for PodResources every 2 s (root: --agents makes a network namespace).
#
#   benches/agent.sh [SECONDS] [READERS]     (default 20 20)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
READERS=${2:-20}
BIN=target/release/fabrik
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
DIR=$(mktemp -d /tmp/fabrik-bench-agent-XXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${SIM:-}" ] && kill "$SIM" 2>/dev/null && wait "$SIM" 2>/dev/null || true
  [ -f "$DIR/kubeconfig" ] && tests/controlplane/cp.sh down "$DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
clk=$(getconf CLK_TCK)
measure() { # label pid
  local t0 t1 rss
  t0=$(awk '{print $14+$15}' /proc/"$2"/stat)
  sleep "$SECS"
  t1=$(awk '{print $14+$15}' /proc/"$2"/stat)
  rss=$(awk '/VmRSS/ {print $2}' /proc/"$2"/status)
  awk -v l="$1" -v t=$((t1 - t0)) -v c="$clk" -v s="$SECS" -v r="$rss" \
    'BEGIN { printf "%-52s CPU %.2f%% of a core, RSS %.1f MiB\n", l, 100*t/c/s, r/1024 }'
}

ADDR=127.0.0.1:19477
"$BIN" agent --fake 8 --listen "$ADDR" --interval 1s 2>"$DIR/agent.log" &
AGENT=$!
PIDS+=("$AGENT")
until curl -sf "http://$ADDR/healthz" >/dev/null; do sleep 0.2; done
sleep 2
echo "fabrik agent --fake 8, 1 s samples, ${SECS}s windows"
measure "no readers" "$AGENT"
for _ in $(seq "$READERS"); do
  curl -sN "http://$ADDR/v1/stream?interval=1s" >/dev/null &
  PIDS+=("$!")
done
sleep 2
measure "$READERS /v1/stream readers" "$AGENT"
printf '%-52s %s bytes JSON, %s bytes /metrics\n' "one sample set (8 GPUs)" \
  "$(curl -s "http://$ADDR/v1/snapshot" | wc -c)" "$(curl -s "http://$ADDR/metrics" | wc -c)"

if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
  tests/controlplane/cp.sh up "$DIR" >/dev/null
  "$BIN" --kubeconfig "$DIR/kubeconfig" sim --nodes 4 --workload --agents >"$DIR/sim.out" 2>"$DIR/sim.log" &
  SIM=$!
  until grep -q '^READY' "$DIR/sim.out" 2>/dev/null; do
    kill -0 "$SIM" 2>/dev/null || { echo "fabrik sim exited:"; tail -20 "$DIR/sim.log"; exit 1; }
    sleep 1
  done
  sleep 5
  pid=$(pgrep -f -- "agent --fake 8 --node .* --pod-resources" | head -1)
  measure "a sim agent, asking the kubelet every 2 s" "$pid"
else
  echo "(not root or no iproute2: the agent with a kubelet socket is not measured)"
fi
